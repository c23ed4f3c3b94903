/*
 * pullprof's flame graph viewer. Plain JavaScript in ES modules, no build
 * step, no other origin: it fetches a profile as JSON from the agent that
 * served this page (?format=json on ../profile, ../heap, ../allocs, ...:
 * the kinds the agent's status lists), merges the samples' stacks by
 * function name into a tree and draws it on a canvas, root at the top.
 * Samples labelled with a thread state (wall-clock profiles, thread dumps)
 * hang under one "state: ..." frame per state, so waiting and running
 * time are told apart at a glance. A canvas keeps 50k-frame profiles
 * smooth: only frames at least a third of a pixel wide are drawn, and
 * hit-testing uses the rectangles of the last drawing.
 *
 * CPU and wall-clock profiles carry a timeline (each sample's time, thread,
 * and the sample it went to): it is drawn above the flame graph, one lane
 * per thread, on a canvas too (a hundred thousand samples would be as many
 * DOM nodes otherwise). Dragging across it builds the flame graph, the
 * table and the totals again from the samples of that time range only.
 *
 * The Recent view reads the record (PULLPROF_RECORD): CPU by thread over
 * the last minutes (../record/timeline) drawn as a row per thread; a range
 * dragged across it is read back at once (../profile?start=&end=) into the
 * same flame graph, and a second range turns it into the difference of the
 * two, per second of each. What the page shows (view, kind, profile id,
 * ranges, search) is kept in the address's hash, so a copied address opens
 * the same view.
 *
 * This is the entry module: it wires the others and starts the page.
 *   state.js     the shared state: the page's elements, the profile shown,
 *                the Recent view's, the view and the address's wishes
 *   format.js    numbers, values, times   agent.js  the agent's status, errors
 *   model.js     a profile's JSON into the merged tree; two into one
 *   draw.js      colours and canvas helpers
 *   flame.js     the flame graph: drawing, tooltip, zoom, search, keyboard
 *   chart.js     what the timeline and the Recent chart share: rows, time
 *                axis, brushing, tooltip
 *   timeline.js  a profile's timeline      tables.js  the function tables
 *   profile.js   a profile shown: its value, summary and downloads
 *   form.js      the kinds offered, fetching a profile, opening a file
 *   recent.js    the Recent view (the record)
 *   address.js   the views and the page's address
 *
 * window.pullprofViewer exposes the state for tests and the console.
 */

import { el, page, rec, state } from "./state.js";
import { agentStatus } from "./agent.js";
import { GUTTER, chartRowY } from "./chart.js";
import { ROW, render, wireFlame } from "./flame.js";
import { LANE, LANE_GAP, composeTimeline, drawLanes, timelineChart, wireTimeline } from "./timeline.js";
import { wireTables } from "./tables.js";
import { load, useValue } from "./profile.js";
import { kindsFrom, offerFallbackKinds, syncForm, useAgentStatus, wireForm } from "./form.js";
import { drawRecent, prepareRecent, recTimeX, recentChart, setRecStatus, updateRecNote, wireRecent } from "./recent.js";
import { applyHash, showView, wireAddress } from "./address.js";

wireForm();
wireTables();
wireFlame();
wireTimeline();
wireRecent();
wireAddress();

offerFallbackKinds();
syncForm();
agentStatus().then(useAgentStatus);
applyHash();

/* For tests and the console. */

window.pullprofViewer = {
  get status() { return state.status; },
  get focus() { return state.focus ? state.focus.name : null; },
  get selected() { return state.selected ? state.selected.name : null; },
  get zoomed() { return !!state.model && state.focus !== state.model.root; },
  get total() { return state.model ? state.model.total : 0; },
  get matched() { return state.matched; },
  get frames() { return state.model ? state.model.nodes.length - 1 : 0; },
  get timings() { return Object.assign({}, state.timings); },
  get error() { return el.error.hidden ? "" : el.error.textContent; },
  /* The widest drawn frame called `name`: its box in viewport CSS pixels. */
  frameBox(name) {
    const r = el.canvas.getBoundingClientRect();
    let best = null;
    state.rows.forEach((list, row) => {
      for (const b of list)
        if (b.node.name === name && (!best || b.w > best.w)) best = { x: r.left + b.x, y: r.top + row * ROW, w: b.w, h: ROW - 1 };
    });
    return best;
  },
  names() {
    const out = new Set();
    for (const list of state.rows) for (const b of list) out.add(b.node.name);
    return Array.from(out);
  },
  load(p) { load(p, { file: "(script)" }); },
  /* The timeline as drawn: its span (ns), lanes, colouring, the range
   * chosen (ns from the window's start) and the note; null without one. */
  get timeline() {
    const tl = state.tl;
    if (!tl) return null;
    return {
      span: tl.span, over: tl.over, events: tl.n, bad: tl.bad, samples: tl.samples,
      colorBy: tl.colorBy, states: tl.states.slice(),
      lanes: tl.lanes.map((L) => ({
        tid: L.tid, name: L.name, earlier: L.earlier.slice(), label: L.label, events: L.order.length,
      })),
      range: state.range ? state.range.slice() : null,
      rangeEvents: state.range ? tl.rangeEvents : tl.n,
      rangeSamples: state.range ? tl.rangeSamples : tl.samples,
      note: el.rangeNote.textContent,
    };
  },
  /* The viewport x of time ns (from the window's start) on the timeline. */
  timeX(ns) {
    const tl = state.tl;
    return el.lanes.getBoundingClientRect().left + GUTTER + (ns / tl.span) * tl.plotW;
  },
  /* The viewport y of lane i's middle, scrolled into view first. */
  laneY(i) { return chartRowY(timelineChart, LANE_GAP + i * (LANE + LANE_GAP), LANE); },
  drawTimeline() { drawLanes(); composeTimeline(); return state.timings.laneDrawMs; },
  get view() { return page.view; },
  /* Where the kinds offered came from: "status" (the agent's), or
   * "fallback" (until it answers, or when it did not). */
  get kindsFrom() { return kindsFrom; },
  /* Draw a timeline given as /record/timeline's JSON in the Recent view
   * (tests: a shape no host at hand makes). */
  showRecent(j) {
    page.view = "recent";
    rec.seq++;
    rec.loadSeq++;
    showView();
    el.recOff.hidden = true;
    el.recWrap.hidden = false;
    rec.data = prepareRecent(j);
    updateRecNote();
    drawRecent();
    setRecStatus("ready");
  },
  /* The Recent view as drawn: its status, source, span (Unix seconds),
   * rows, ranges and note. */
  get recent() {
    const d = rec.data;
    return {
      status: rec.status, source: rec.source, span: rec.span, brush: rec.brush,
      start: d ? d.start : null, end: d ? d.end : null, step: d ? d.step : null,
      threads: d ? d.threads.map((t) => ({ tid: t.tid, name: t.name, cpuSeconds: t.cpuSeconds, cpu: Array.from(t.cpu) })) : [],
      other: !!(d && d.other), rows: d ? (rec.rows || []).map((r) => ({ label: r.label, kind: r.kind, y: r.y, h: r.h })) : [],
      rowsDrawn: rec.rowsDrawn, a: rec.a ? rec.a.slice() : null, b: rec.b ? rec.b.slice() : null,
      note: el.recNote.textContent, off: el.recOff.hidden ? "" : el.recOff.textContent,
      sources: Array.from(el.recSource.options, (o) => ({ value: o.value, text: o.textContent })),
    };
  },
  /* The viewport x of Unix time t on the Recent chart. */
  recentX(t) { return el.recChart.getBoundingClientRect().left + GUTTER + recTimeX(t); },
  /* The viewport y of the middle of the chart's row i (0: all threads). */
  recentY(i) { return chartRowY(recentChart, rec.rows[i].y, rec.rows[i].h); },
  /* A difference shown: each function's row of the table (per second of
   * A and of B, and B - A); null without one. */
  get diff() {
    if (!state.diff) return null;
    return Array.from(el.deltaTable.tBodies[0].rows, (tr) => ({
      name: tr.dataset.name, a: Number(tr.dataset.a), b: Number(tr.dataset.b), delta: Number(tr.dataset.delta),
    }));
  },
  /* The widest drawn frame called name: its value per second in A and B. */
  diffNode(name) {
    let best = null;
    for (const list of state.rows) for (const b of list)
      if (b.node.name === name && (!best || b.w > best.w)) best = b;
    return best ? { a: best.node.a, b: best.node.b } : null;
  },
  render() { render(); return state.timings.renderMs; },
  /* Build the tree again from the loaded profile: {buildMs, renderMs}. */
  rebuild() { useValue(state.valueIndex); render(); return Object.assign({}, state.timings); },
};
