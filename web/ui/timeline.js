/* A profile's timeline (CPU and wall-clock profiles): one lane per
 * thread, each sample at its time; a range dragged across it shows only
 * that range in the flame graph and the tables. */

import { el, state } from "./state.js";
import { formatValue, intFmt, secs } from "./format.js";
import { locationFrames } from "./model.js";
import { SYNTHETIC_COLOR, cssVar, nameColor, perFrame, stateColor } from "./draw.js";
import { AXIS_H, GUTTER, chartContext, chartRow, chartWidths, drawAxis, wireChart } from "./chart.js";
import { useValue } from "./profile.js";

export const LANE = 14; // CSS pixels per thread's lane
export const LANE_GAP = 2;

function labelOf(s, key) {
  for (const l of s.labels || []) if (l.key === key && typeof l.str === "string") return l.str;
  return null;
}

/* The profile's timeline, ready to draw and to filter by, or null when it
 * has none: the events in typed arrays; one lane per thread (the busiest
 * first; the process's lost samples, tid 0, last); each sample's colour
 * as an index into a palette, by its leaf function and by its thread
 * state. An event the profile cannot back (a sample index out of range)
 * is left out and counted. */

export function prepareTimeline(p) {
  const tl = p.timeline;
  if (!tl || typeof tl !== "object" || !Array.isArray(tl.events)) return null;
  const t0 = performance.now();
  const span = Math.max(1, Number(tl.end_ns) - Number(tl.start_ns) || 0);
  const ns = p.samples.length;
  const frames = locationFrames(p);
  const palette = [];
  const paletteIndex = new Map();
  const colorIndex = (c) => {
    let i = paletteIndex.get(c);
    if (i === undefined) {
      i = palette.length;
      palette.push(c);
      paletteIndex.set(c, i);
    }
    return i;
  };
  const byFunc = new Int32Array(ns);
  const byState = new Int32Array(ns);
  const leafNames = new Array(ns);
  const threadNames = new Array(ns);
  const stateNames = new Array(ns);
  const stateIndex = new Map();
  const none = colorIndex(SYNTHETIC_COLOR);
  p.samples.forEach((s, i) => {
    const locs = s.locations || [];
    const chain = locs.length ? frames[locs[0]] : null;
    const leaf = chain && chain.length ? chain[chain.length - 1] : null;
    leafNames[i] = leaf ? leaf.name : "(no stack)";
    byFunc[i] = leaf ? colorIndex(nameColor(leaf.name, leaf.unknown)) : none;
    threadNames[i] = labelOf(s, "thread_name");
    const st = labelOf(s, "state");
    stateNames[i] = st;
    if (st && !stateIndex.has(st)) stateIndex.set(st, colorIndex(stateColor(st)));
    byState[i] = st ? stateIndex.get(st) : none;
  });

  const evs = tl.events;
  const n = evs.length;
  const time = new Float64Array(n);
  const dur = new Float64Array(n);
  const sample = new Int32Array(n);
  const count = new Float64Array(n);
  const value = new Float64Array(n);
  const byTid = new Map();
  const period = Number(p.period) || 0;
  let kept = 0;
  let bad = 0;
  let samples = 0;
  for (let i = 0; i < n; i++) {
    const e = evs[i];
    const si = Array.isArray(e) ? e[2] : -1;
    if (!Number.isInteger(si) || si < 0 || si >= ns) {
      bad++;
      continue;
    }
    const tid = Number(e[1]) || 0;
    let L = byTid.get(tid);
    if (!L) {
      L = { tid, weight: 0, list: [] };
      byTid.set(tid, L);
    }
    const t = Math.min(Math.max(Number(e[0]) || 0, 0), span);
    const c = Number(e[3]) || 0;
    const v = Number(e[4]) || 0;
    time[kept] = t;
    // A sample stands for the time before it: its CPU (or wall) time.
    // The process's lost samples were dropped at no known time (the
    // agent puts them at the window's end): a mark, not a span.
    dur[kept] = tid ? Math.min(v > 0 ? v : period, span) : 0;
    sample[kept] = si;
    count[kept] = c;
    value[kept] = v;
    samples += c;
    L.weight += v > 0 ? v : c;
    L.list.push(kept);
    kept++;
  }
  const lanes = Array.from(byTid.values());
  lanes.sort((a, b) => (!a.tid) - (!b.tid) || b.weight - a.weight || a.tid - b.tid);
  for (const L of lanes) {
    L.order = Int32Array.from(L.list).sort((a, b) => time[a] - time[b] || a - b);
    L.list = null;
    // A thread is named by its last sample: threads often name
    // themselves after they start, and the agent reads a thread's name
    // again only now and then, so its first samples may carry its
    // creator's. The names it had before are kept for its tooltip.
    const seen = [];
    for (let k = L.order.length - 1; k >= 0; k--) {
      const name = threadNames[sample[L.order[k]]];
      if (name && !seen.includes(name)) seen.push(name);
    }
    L.name = L.tid ? seen[0] || "thread" : "process";
    L.earlier = seen.slice(1);
    L.label = L.tid ? `${L.name} (${L.tid})` : "process (lost samples)";
  }
  const order = ["running", "sleeping", "disk-sleep"];
  const states = Array.from(stateIndex.keys()).sort((a, b) => {
    const ia = order.indexOf(a) < 0 ? order.length : order.indexOf(a);
    const ib = order.indexOf(b) < 0 ? order.length : order.indexOf(b);
    return ia - ib || (a < b ? -1 : a > b ? 1 : 0);
  });
  state.timings.timelineMs = performance.now() - t0;
  return {
    span, over: Number(tl.over) || 0, n: kept, bad, samples,
    time, dur, sample, count, value, lanes,
    palette, byFunc, byState, leafNames, stateNames, states,
    colorBy: states.length ? "state" : "function",
    rangeEvents: 0, rangeSamples: 0,
    base: null, width: 0, height: 0, plotW: 1,
  };
}

/* The weight of each sample in the chosen time range, in value vi (the
 * first value is an event's count, the second its nanoseconds), or null
 * for the whole window. Counts the range's events and samples. */
export function rangeWeights(vi) {
  const tl = state.tl;
  const r = state.range;
  if (!tl || !r) return null;
  const w = new Float64Array(state.profile.samples.length);
  const src = vi === 0 ? tl.count : tl.value;
  let events = 0;
  let samples = 0;
  for (let i = 0; i < tl.n; i++) {
    const t = tl.time[i];
    if (t < r[0] || t > r[1]) continue;
    w[tl.sample[i]] += src[i];
    events++;
    samples += tl.count[i];
  }
  tl.rangeEvents = events;
  tl.rangeSamples = samples;
  return w;
}

export function updateRangeNote() {
  const tl = state.tl;
  if (!tl) return;
  let text;
  if (state.range) {
    text = `${secs(state.range[0])} – ${secs(state.range[1])} of ${secs(tl.span)}, ` +
      `${intFmt.format(tl.rangeSamples)} sample${tl.rangeSamples === 1 ? "" : "s"}`;
  } else {
    const threads = tl.lanes.filter((L) => L.tid).length;
    text = `Whole window: ${secs(tl.span)}, ${intFmt.format(tl.samples)} samples on ` +
      `${intFmt.format(threads)} thread${threads === 1 ? "" : "s"}`;
  }
  if (tl.over)
    text += ` (${intFmt.format(tl.over)} more samples, past the timeline's bound, are in the whole window's totals only)`;
  if (tl.bad)
    text += ` (${intFmt.format(tl.bad)} event${tl.bad === 1 ? "" : "s"} naming no sample of the profile left out)`;
  el.rangeNote.textContent = text;
  el.rangeNote.classList.toggle("ranged", !!state.range);
  el.wholeWindow.disabled = !state.range;
}

function updateLegend() {
  const tl = state.tl;
  el.stateLegend.replaceChildren();
  el.stateLegend.hidden = !tl || tl.colorBy !== "state";
  if (el.stateLegend.hidden) return;
  for (const st of tl.states) {
    const item = document.createElement("span");
    item.dataset.state = st;
    const sw = document.createElement("span");
    sw.className = "swatch";
    sw.style.background = stateColor(st);
    item.append(sw, st);
    el.stateLegend.append(item);
  }
}

/* The lanes, drawn once into an offscreen canvas (again on a resize, a
 * colour change or a colour scheme change); brushing only composes it
 * with the range on top. Each pixel column of a lane takes the colour
 * most of its samples have (a majority vote), so a hundred thousand
 * samples come down to at most one rectangle per column and lane, drawn
 * colour by colour. */
export function drawLanes() {
  const tl = state.tl;
  if (!tl || el.timeline.hidden) return;
  const t0 = performance.now();
  const [width, plotW] = chartWidths(el.lanesWrap);
  const height = Math.max(tl.lanes.length, 1) * (LANE + LANE_GAP) + LANE_GAP;
  const base = tl.base || (tl.base = document.createElement("canvas"));
  tl.width = width;
  tl.height = height;
  tl.plotW = plotW;
  const ctx = chartContext(base, width, height);
  const panel = cssVar("--panel");
  const fg = cssVar("--fg");
  const muted = cssVar("--muted");
  tl.lanes.forEach((L, i) => {
    chartRow(ctx, LANE_GAP + i * (LANE + LANE_GAP), LANE, plotW, L.label, L.tid ? fg : muted, panel);
  });
  if (!tl.lanes.length) {
    ctx.fillStyle = muted;
    ctx.fillText("no samples on the timeline in this window", GUTTER, LANE_GAP + LANE / 2);
  }
  const colors = tl.colorBy === "state" ? tl.byState : tl.byFunc;
  const scale = plotW / tl.span;
  const runs = tl.palette.map(() => []);
  const col = new Int32Array(plotW);
  const votes = new Float64Array(plotW);
  tl.lanes.forEach((L, li) => {
    col.fill(-1);
    votes.fill(0);
    const order = L.order;
    for (let k = 0; k < order.length; k++) {
      const i = order[k];
      const c = colors[tl.sample[i]];
      const x1 = Math.min(plotW - 1, Math.floor(tl.time[i] * scale));
      const x0 = Math.max(0, Math.min(x1, Math.floor((tl.time[i] - tl.dur[i]) * scale)));
      for (let x = x0; x <= x1; x++) {
        if (col[x] === c) votes[x]++;
        else if (votes[x] > 0) votes[x]--;
        else {
          col[x] = c;
          votes[x] = 1;
        }
      }
    }
    const y = LANE_GAP + li * (LANE + LANE_GAP);
    for (let x = 0; x < plotW;) {
      const c = col[x];
      let e = x + 1;
      while (e < plotW && col[e] === c) e++;
      if (c >= 0) runs[c].push(GUTTER + x, y, e - x);
      x = e;
    }
  });
  runs.forEach((list, c) => {
    if (!list.length) return;
    ctx.fillStyle = tl.palette[c];
    for (let k = 0; k < list.length; k += 3) ctx.fillRect(list[k], list[k + 1], list[k + 2], LANE);
  });
  state.timings.laneDrawMs = performance.now() - t0;
  el.lanes.dataset.lanes = String(tl.lanes.length);
}

/* The range (or the brush being dragged) over a drawing of height h. */
function shade(ctx, h) {
  const tl = state.tl;
  let a;
  let b;
  if (state.drag) {
    a = Math.min(state.drag.from, state.drag.to);
    b = Math.max(state.drag.from, state.drag.to);
  } else if (state.range) {
    a = (state.range[0] / tl.span) * tl.plotW;
    b = (state.range[1] / tl.span) * tl.plotW;
  } else {
    return;
  }
  const accent = cssVar("--accent");
  if (state.drag) {
    ctx.globalAlpha = 0.25;
    ctx.fillStyle = accent;
    ctx.fillRect(GUTTER + a, 0, Math.max(b - a, 1), h);
  } else {
    ctx.globalAlpha = 0.65;
    ctx.fillStyle = cssVar("--bg");
    ctx.fillRect(GUTTER, 0, a, h);
    ctx.fillRect(GUTTER + b, 0, tl.plotW - b, h);
  }
  ctx.globalAlpha = 1;
  ctx.fillStyle = accent;
  ctx.fillRect(GUTTER + a - 1, 0, 2, h);
  ctx.fillRect(GUTTER + b - 1, 0, 2, h);
}

function tickLabel(t, step) {
  if (step >= 1e9) return (t / 1e9).toFixed(0) + " s";
  if (step >= 1e8) return (t / 1e9).toFixed(1) + " s";
  if (step >= 1e7) return (t / 1e9).toFixed(2) + " s";
  return (t / 1e6).toFixed(0) + " ms";
}

export function composeTimeline() {
  const tl = state.tl;
  if (!tl || !tl.base || el.timeline.hidden) return;
  const dpr = window.devicePixelRatio || 1;
  const cv = el.lanes;
  if (cv.width !== tl.base.width || cv.height !== tl.base.height) {
    cv.width = tl.base.width;
    cv.height = tl.base.height;
  }
  cv.style.width = tl.width + "px";
  cv.style.height = tl.height + "px";
  const ctx = cv.getContext("2d");
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, cv.width, cv.height);
  ctx.drawImage(tl.base, 0, 0);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  shade(ctx, tl.height);

  const a = drawAxis(el.axis, tl.width, tl.plotW, {
    title: "time in the window", from: 0, to: tl.span, gap: 70, label: tickLabel,
    steps: [1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 2e8, 5e8, 1e9, 2e9, 5e9, 1e10, 2e10, 3e10, 6e10, 12e10, 3e11, 6e11],
  });
  shade(a, AXIS_H);
  el.lanes.dataset.range = state.range ? state.range.join("-") : "";
}

const scheduleCompose = perFrame(composeTimeline);

export function showTimeline() {
  const tl = state.tl;
  el.timeline.hidden = !tl;
  el.tlTip.hidden = true;
  if (!tl) return;
  el.colorBy.hidden = !tl.states.length;
  for (const input of el.colorBy.querySelectorAll("input")) input.checked = input.value === tl.colorBy;
  updateLegend();
  updateRangeNote();
  drawLanes();
  composeTimeline();
}

function setRange(r) {
  if (!state.tl || (!r && !state.range)) return;
  state.range = r;
  el.tlTip.hidden = true;
  useValue(state.valueIndex);
  composeTimeline();
  el.announce.textContent = el.rangeNote.textContent;
}

function setColorBy(how) {
  const tl = state.tl;
  if (!tl || tl.colorBy === how) return;
  tl.colorBy = how;
  updateLegend();
  drawLanes();
  composeTimeline();
}

/* The event of lane L drawn at time t (its span covers t), else the
 * nearest within slack nanoseconds, or -1. */
function eventAt(L, t, slack) {
  const tl = state.tl;
  const o = L.order;
  let lo = 0;
  let hi = o.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (tl.time[o[mid]] < t) lo = mid + 1;
    else hi = mid;
  }
  let best = -1;
  let bestD = slack;
  for (const k of [lo, lo - 1]) {
    if (k < 0 || k >= o.length) continue;
    const i = o[k];
    const d = tl.time[i] - tl.dur[i] <= t && t <= tl.time[i] ? 0 : Math.abs(tl.time[i] - t);
    if (d <= bestD) {
      best = i;
      bestD = d;
    }
  }
  return best;
}

/* The timeline's tooltip at plot x, y (c.describe). */
function describeTimeline(line, x, y, onPlot) {
  const tl = state.tl;
  const t = (x / tl.plotW) * tl.span;
  if (onPlot) {
    const L = tl.lanes[Math.floor((y - LANE_GAP / 2) / (LANE + LANE_GAP))];
    if (!L) return null;
    line(L.label + (L.earlier.length ? ` (earlier: ${L.earlier.join(", ")})` : ""));
    const i = eventAt(L, t, (3 * tl.span) / tl.plotW);
    if (i >= 0) {
      const si = tl.sample[i];
      line(tl.leafNames[si], true);
      const parts = [secs(tl.time[i])];
      if (tl.stateNames[si]) parts.push(tl.stateNames[si]);
      if (tl.value[i]) parts.push(formatValue(tl.value[i], "nanoseconds"));
      if (tl.count[i] !== 1) parts.push(`${intFmt.format(tl.count[i])} samples`);
      line(parts.join(" · "));
    } else {
      line(secs(t) + " · no sample");
    }
  } else {
    line(secs(t));
  }
  return "Drag to show a time range";
}

export const timelineChart = {
  wrap: el.lanesWrap, scroll: el.lanesScroll, plot: el.lanes, axis: el.axis, tip: el.tlTip,
  holder: state,
  ready: () => !!state.tl,
  width: () => state.tl.width,
  plotW: () => state.tl.plotW,
  redraw: () => {
    drawLanes();
    composeTimeline();
  },
  draw: scheduleCompose,
  click: composeTimeline,
  range: (from, to) => {
    const tl = state.tl;
    const ns = (x) => (x / tl.plotW) * tl.span;
    setRange([ns(from), ns(to)]);
  },
  hasRange: () => !!state.range,
  clear: () => setRange(null),
  describe: describeTimeline,
};

/* The timeline's events: brushing, its tooltip, Whole window, colour by. */
export function wireTimeline() {
  wireChart(timelineChart);
  el.wholeWindow.addEventListener("click", () => setRange(null));
  el.colorBy.addEventListener("change", (ev) => setColorBy(ev.target.value));
}
