/* The Recent view: the record's last minutes (PULLPROF_RECORD) as CPU by
 * thread, and the flame graph of a range of it, or of two compared. */

import { el, page, rec, state } from "./state.js";
import { clock, clockTenths, pctFmt, rangeText, secText } from "./format.js";
import { check, mergeProfiles } from "./model.js";
import { cssVar, perFrame } from "./draw.js";
import { AXIS_H, GUTTER, chartContext, chartRow, chartWidths, drawAxis, wireChart } from "./chart.js";
import { load, setStatus, showError } from "./profile.js";
import { answerText } from "./agent.js";
import { writeHash } from "./address.js";

/* The record (PULLPROF_RECORD) keeps every thread's CPU samples for the
 * last minutes. The view draws /record/timeline (CPU by thread in steps)
 * as one row per thread under a row of all threads together; dragging
 * across it sets range A, whose profile (/profile?start=&end=, answered
 * at once from the record) fills the flame graph below; a second range B
 * turns the flame graph into their difference. Times are Unix seconds
 * throughout, so a range in the page's address means the same moment
 * when the address is opened again. */

const REC_TOTAL = 46; // CSS pixels of the all-threads row
const REC_ROW = 13; // per thread: one CPU is the row's height
const REC_GAP = 2;

export function setRecStatus(st) {
  rec.status = st;
  document.body.dataset.recent = st;
}

function showRecordOff(why) {
  el.recOff.replaceChildren();
  const p1 = document.createElement("p");
  p1.append("The record is off in this process: the agent keeps no look-back of its CPU samples, so there is nothing recent to show. Start the process with ");
  const c = document.createElement("code");
  c.textContent = "PULLPROF_RECORD=5m";
  p1.append(c, " (how far back to keep; ");
  const c2 = document.createElement("code");
  c2.textContent = "PULLPROF_RECORD_HZ";
  p1.append(c2, " sets its rate) and open this view again.");
  el.recOff.append(p1);
  if (why) {
    const p2 = document.createElement("p");
    p2.textContent = "The agent said: " + why;
    el.recOff.append(p2);
  }
  el.recOff.hidden = false;
  el.recWrap.hidden = true;
  el.recNote.textContent = "";
  rec.data = null;
  setRecStatus("off");
}

function showRecentError(text) {
  el.recOff.replaceChildren(text);
  el.recOff.hidden = false;
  el.recWrap.hidden = true;
  rec.data = null;
  setRecStatus("error");
}

function fillSources() {
  const list = (rec.info && rec.info.savings && rec.info.savings.list) || [];
  const keep = rec.source;
  el.recSource.replaceChildren();
  const live = document.createElement("option");
  live.value = "live";
  live.textContent = "the record, live";
  el.recSource.append(live);
  for (const sv of list) {
    const o = document.createElement("option");
    o.value = String(sv.id);
    o.textContent = `saved #${sv.id}${sv.reason ? ": " + sv.reason : ""} (${clock(sv.start)}–${clock(sv.end)})`;
    el.recSource.append(o);
  }
  if (keep !== "live" && !list.some((sv) => String(sv.id) === keep)) {
    // A recording the address names but the agent no longer lists: kept
    // in the picker, so the agent's answer says what became of it.
    const o = document.createElement("option");
    o.value = keep;
    o.textContent = `saved #${keep} (not listed)`;
    el.recSource.append(o);
  }
  el.recSource.value = keep;
  el.recSpan.disabled = keep !== "live";
  // The kinds the record keeps no snapshots of, and why.
  const snaps = (rec.info && rec.info.snapshots) || {};
  for (const o of el.recKind.options) {
    const k = o.value === "allocs" ? "heap" : o.value;
    const why = snaps[k] && snaps[k].not_recorded;
    o.title = why ? `not recorded: ${why}` : "";
    o.textContent = o.textContent.replace(/ \(not recorded\)$/, "") + (why ? " (not recorded)" : "");
  }
}

/* A step that gives the range about 400 columns and every step a few
 * samples at the record's rate: whole tenths of a second at least. */
function recStep(seconds) {
  const hz = (rec.info && Number(rec.info.hz)) || 19;
  const want = Math.max(seconds / 400, 4 / hz, 0.1);
  const nice = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600];
  return nice.find((s) => s >= want) || 600;
}

export function prepareRecent(j) {
  const start = Number(j.start);
  const end = Number(j.end);
  const step = Number(j.step_seconds) || 1;
  const threads = (j.threads || []).map((t) => ({
    tid: Number(t.tid) || 0, name: String(t.name || "?"),
    cpuSeconds: Number(t.cpu_seconds) || 0, cpu: Float64Array.from(t.cpu || [], Number),
  }));
  const n = Math.max(0, ...threads.map((t) => t.cpu.length), (j.other_threads || []).length);
  const other = j.other_threads ? Float64Array.from(j.other_threads, Number) : null;
  const total = new Float64Array(n);
  for (const t of threads) t.cpu.forEach((v, i) => { total[i] += v; });
  if (other) other.forEach((v, i) => { total[i] += v; });
  let peak = 0;
  for (const v of total) peak = Math.max(peak, v / step);
  const otherPeak = other ? Math.max(1, ...Array.from(other, (v) => v / step)) : 0;
  return { start, end: Math.max(end, start + 1e-3), step, threads, other, otherPeak, total, peak, n };
}

/* The rows drawn: the total, each thread, the other threads summed. */
function recRows() {
  const d = rec.data;
  const rows = [{ kind: "total", label: "all threads", values: d.total, scale: Math.max(d.peak, 1e-9), h: REC_TOTAL }];
  for (const t of d.threads)
    rows.push({ kind: "thread", label: `${t.name} (${t.tid})`, tid: t.tid, name: t.name, values: t.cpu, scale: 1, h: REC_ROW, thread: t });
  if (d.other)
    rows.push({ kind: "other", label: "other threads", values: d.other, scale: d.otherPeak, h: REC_ROW * 2 });
  let y = REC_GAP;
  for (const r of rows) {
    r.y = y;
    y += r.h + REC_GAP;
  }
  return rows;
}

export function recTimeX(t) {
  const d = rec.data;
  return ((t - d.start) / (d.end - d.start)) * rec.plotW;
}

export function drawRecent() {
  const d = rec.data;
  if (!d || el.recent.hidden || el.recWrap.hidden) return;
  const [width, plotW] = chartWidths(el.recWrap);
  const rows = recRows();
  const last = rows[rows.length - 1];
  const height = last.y + last.h + REC_GAP;
  rec.width = width;
  rec.plotW = plotW;
  rec.height = height;
  rec.rows = rows;
  const cv = el.recChart;
  const ctx = chartContext(cv, width, height);
  const panel = cssVar("--panel");
  const fg = cssVar("--fg");
  const muted = cssVar("--muted");
  const cpuColor = "hsl(18, 78%, 56%)";
  const totalColor = "hsl(4, 70%, 52%)";
  const span = d.end - d.start;
  for (const r of rows) {
    chartRow(ctx, r.y, r.h, plotW, r.label, r.kind === "thread" ? fg : muted, panel);
    ctx.fillStyle = r.kind === "total" ? totalColor : cpuColor;
    ctx.beginPath();
    for (let i = 0; i < r.values.length; i++) {
      const v = r.values[i] / d.step / r.scale;
      if (v <= 0) continue;
      const t0 = d.start + i * d.step;
      const x0 = ((t0 - d.start) / span) * plotW;
      const x1 = Math.min(plotW, ((Math.min(t0 + d.step, d.end) - d.start) / span) * plotW);
      const h = Math.max(1, Math.min(1, v) * r.h);
      ctx.rect(GUTTER + x0, r.y + r.h - h, Math.max(x1 - x0, 0.6), h);
    }
    ctx.fill();
  }
  if (!d.threads.length) {
    ctx.fillStyle = muted;
    ctx.fillText("no CPU samples in this range", GUTTER + 8, rows[0].y + rows[0].h / 2);
  }
  // The total's scale, on its row.
  ctx.fillStyle = muted;
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillText(`peak ${d.peak.toFixed(2)} CPUs`, 6, rows[0].y + rows[0].h - 7);
  shadeRecent(ctx, height);
  rec.rowsDrawn = rows.length;
  cv.dataset.rows = String(rows.length);

  const a = drawAxis(el.recAxis, width, plotW, {
    title: "local time", from: d.start, to: d.end, gap: 80,
    steps: [0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600],
    label: (t, step) => (step < 1 ? clockTenths(t) : clock(t)),
  });
  shadeRecent(a, AXIS_H);
}

/* Ranges A and B (and the one being dragged) over a drawing h high. */
function shadeRecent(ctx, h) {
  const bands = [];
  if (rec.a) bands.push(["A", recTimeX(rec.a[0]), recTimeX(rec.a[1]), "hsl(212, 70%, 50%)"]);
  if (rec.b) bands.push(["B", recTimeX(rec.b[0]), recTimeX(rec.b[1]), "hsl(32, 90%, 48%)"]);
  if (rec.drag) {
    const lo = Math.min(rec.drag.from, rec.drag.to);
    const hi = Math.max(rec.drag.from, rec.drag.to);
    bands.push([rec.drag.which.toUpperCase(), lo, hi, rec.drag.which === "a" ? "hsl(212, 70%, 50%)" : "hsl(32, 90%, 48%)"]);
  }
  ctx.save();
  ctx.beginPath();
  ctx.rect(GUTTER, 0, rec.plotW, h);
  ctx.clip();
  ctx.font = "bold 12px system-ui, sans-serif";
  ctx.textBaseline = "top";
  for (const [name, x0, x1, color] of bands) {
    const lo = Math.max(-2, x0);
    const hi = Math.min(rec.plotW + 2, x1);
    ctx.globalAlpha = 0.18;
    ctx.fillStyle = color;
    ctx.fillRect(GUTTER + lo, 0, Math.max(hi - lo, 1), h);
    ctx.globalAlpha = 1;
    ctx.fillRect(GUTTER + lo - 1, 0, 2, h);
    ctx.fillRect(GUTTER + hi - 1, 0, 2, h);
    if (h > AXIS_H) ctx.fillText(name, GUTTER + lo + 4, 3);
  }
  ctx.restore();
}

const scheduleRecentDraw = perFrame(drawRecent);

export function updateRecNote() {
  const d = rec.data;
  if (!d) return;
  const src = rec.source === "live" ? "the record" : `saved recording #${rec.source}`;
  let text = `${src}: ${clock(d.start)} to ${clock(d.end)} (${(d.end - d.start).toFixed(1)} s) in steps of ` +
    `${d.step} s, ${d.threads.length} thread${d.threads.length === 1 ? "" : "s"}` +
    (d.other ? " and the other threads summed" : "");
  if (rec.kind !== "profile") text += ` · ranges show ${el.recKind.selectedOptions[0].textContent}`;
  if (rec.a) text += ` · A ${rangeText(rec.a)}`;
  if (rec.b) text += ` · B ${rangeText(rec.b)}`;
  if (rec.info && rec.info.sampling && rec.info.sampling !== "on" && rec.source === "live")
    text += ` · the record stopped sampling: ${rec.info.sampling}`;
  if (!rec.a) text += " · drag across the chart to see a range's flame graph";
  else if (!rec.b) text += " · drag again to compare with a second range (B)";
  el.recNote.textContent = text;
  el.recClear.disabled = !rec.a && !rec.b;
  el.recClearB.disabled = !rec.b;
  for (const input of el.recBrush.querySelectorAll("input")) input.checked = input.value === rec.brush;
}

/* /record, then the timeline of the source chosen. */
export async function loadRecent() {
  const seq = ++rec.loadSeq;
  const stale = () => seq !== rec.loadSeq;
  setRecStatus("loading");
  el.recOff.hidden = true;
  el.recNote.textContent = "Reading the record…";
  try {
    const r = await fetch("../record", { cache: "no-store" });
    if (stale()) return;
    if (r.status === 404) {
      showRecordOff(await answerText(r));
      return;
    }
    if (!r.ok) {
      showRecentError(`The agent answered ${r.status} ${r.statusText} for ../record: ${await answerText(r)}`);
      return;
    }
    rec.info = await r.json();
    if (stale()) return;
    fillSources();
    if (!rec.info.on && rec.source === "live") {
      showRecordOff("");
      return;
    }
    const q = new URLSearchParams();
    let seconds;
    if (rec.source !== "live") {
      q.set("recording", rec.source);
      const sv = ((rec.info.savings || {}).list || []).find((x) => String(x.id) === rec.source);
      seconds = sv ? sv.end - sv.start : 60;
    } else {
      const covered = Number((rec.info.coverage || {}).seconds) || 0;
      seconds = rec.span ? Math.min(rec.span, covered || rec.span) : covered || 60;
      // Ranges from the address reaching back before the span asked:
      // the chart reaches back to them, as far as the record does (a
      // range older than that gets the agent's word on what it holds).
      const first = Math.min(...[rec.a, rec.b].filter(Boolean).map((x) => x[0]));
      const oldest = Number((rec.info.coverage || {}).oldest) || 0;
      const newest = Number((rec.info.coverage || {}).newest) || Date.now() / 1000;
      if (Number.isFinite(first) && rec.span && first < Date.now() / 1000 - rec.span && oldest) {
        const from = Math.max(first - 0.05 * Math.max(rec.span, 1), oldest);
        q.set("start", secText(from));
        seconds = Math.max(newest, Date.now() / 1000) - from;
      } else if (rec.span) {
        q.set("last", String(rec.span));
      }
    }
    q.set("step", String(recStep(Math.max(seconds, 1))));
    const url = `../record/timeline?${q}`;
    const t = await fetch(url, { cache: "no-store" });
    if (stale()) return;
    if (!t.ok) {
      const why = await answerText(t);
      if (t.status === 404 && !rec.info.on) showRecordOff(why);
      else showRecentError(`The agent answered ${t.status} ${t.statusText} for ${url}: ${why}`);
      return;
    }
    const j = await t.json();
    if (stale()) return;
    rec.data = prepareRecent(j);
    el.recWrap.hidden = false;
    el.recOff.hidden = true;
    updateRecNote();
    drawRecent();
    setRecStatus("ready");
    if (rec.a) loadRanges();
  } catch (e) {
    showRecentError("Could not read the record: " + String(e.message || e));
  }
}

function rangeUrl(r) {
  const q = new URLSearchParams();
  if (rec.source !== "live") q.set("recording", rec.source);
  q.set("start", secText(r[0]));
  q.set("end", secText(r[1]));
  q.set("format", "json");
  return `../${rec.kind}?${q}`;
}

async function fetchRange(r, signal) {
  const url = rangeUrl(r);
  const hit = rec.cache.get(url);
  if (hit) return hit;
  const resp = await fetch(url, { signal, cache: "no-store" });
  if (!resp.ok) {
    const err = new Error(await answerText(resp));
    err.title = `The agent answered ${resp.status} ${resp.statusText} for ${url}`;
    throw err;
  }
  const got = { p: await resp.json(), id: resp.headers.get("X-Pullprof-Profile-Id") };
  if (rec.cache.size > 16) rec.cache.delete(rec.cache.keys().next().value);
  rec.cache.set(url, got);
  return got;
}

/* The flame graph of range A, or of B against A. */
async function loadRanges() {
  const seq = ++rec.seq;
  if (rec.controller) rec.controller.abort();
  if (!rec.a) {
    state.diff = null;
    el.result.hidden = true;
    setStatus("idle");
    el.progress.textContent = "";
    return;
  }
  const controller = new AbortController();
  rec.controller = controller;
  el.error.hidden = true;
  setStatus("loading");
  el.progress.textContent = rec.b ? "Reading ranges A and B from the record…" : "Reading range A from the record…";
  const want = page.valueWanted || (state.profile && state.profile.sample_types[state.valueIndex] || {}).type || "cpu";
  try {
    const a = await fetchRange(rec.a, controller.signal);
    const b = rec.b ? await fetchRange(rec.b, controller.signal) : null;
    if (seq !== rec.seq) return;
    page.valueWanted = null;
    if (!b) {
      load(a.p, { kind: rec.kind, id: a.id }, want);
      el.progress.textContent = `Range A: ${rangeText(rec.a)}, from the record.`;
    } else {
      check(a.p);
      check(b.p);
      const m = mergeProfiles(a.p, b.p);
      // Per second of what each answer covers: a range reaching back
      // past the record is answered for the part it holds.
      const secondsOf = (p, r) => (Number(p.duration_nanos) > 0 ? Number(p.duration_nanos) / 1e9 : r[1] - r[0]);
      load(m.p, { kind: rec.kind }, want, {
        sides: m.sides, seconds: [secondsOf(a.p, rec.a), secondsOf(b.p, rec.b)],
        ranges: [rec.a.slice(), rec.b.slice()], ids: [a.id, b.id],
      });
      el.progress.textContent = `B against A, per second of each: ${rangeText(rec.b)} against ${rangeText(rec.a)}.`;
    }
  } catch (e) {
    if (e.name === "AbortError" || seq !== rec.seq) return;
    showError(e.title || "Could not read the range", String(e.message || e));
  } finally {
    if (rec.controller === controller) rec.controller = null;
  }
}

function setRecRange(which, r) {
  if (which === "a") {
    const first = !rec.a && !rec.b;
    rec.a = r;
    // After the first range, the next drag compares.
    if (first) rec.brush = "b";
  } else if (!rec.a) {
    rec.a = r; // B without A is A
    rec.brush = "b";
  } else {
    rec.b = r;
  }
  updateRecNote();
  scheduleRecentDraw();
  writeHash();
  loadRanges();
}

function clearRecRanges(onlyB) {
  if (onlyB) {
    rec.b = null;
  } else {
    rec.a = null;
    rec.b = null;
    rec.brush = "a";
  }
  updateRecNote();
  scheduleRecentDraw();
  writeHash();
  loadRanges();
}

/* The Recent chart's tooltip at plot x, y (c.describe). */
function describeRecent(line, x, y, onPlot) {
  const d = rec.data;
  const t = d.start + (x / rec.plotW) * (d.end - d.start);
  const i = Math.min(d.n - 1, Math.max(0, Math.floor((t - d.start) / d.step)));
  if (onPlot) {
    const row = (rec.rows || []).find((w) => y >= w.y - REC_GAP / 2 && y < w.y + w.h + REC_GAP / 2);
    if (!row) return null;
    line(row.label, true);
    const v = (row.values[i] || 0) / d.step;
    line(`${clockTenths(d.start + i * d.step)} · ${row.kind === "thread" ? pctFmt.format(v) + " of a CPU" : v.toFixed(2) + " CPUs"}`);
    if (row.thread) line(`${row.thread.cpuSeconds.toFixed(2)} s of CPU in the whole chart`);
  } else {
    line(clockTenths(t));
  }
  return rec.a && rec.brush === "b" ? "Drag to set range B (compare with A)" : "Drag to set range A";
}

/* Each kind's value shown first: CPU time, the heap in use (its change),
 * allocated bytes, the time waited. */
const RANGE_VALUE = { profile: "cpu", heap: "inuse_space", allocs: "alloc_space", mutex: "delay", block: "delay" };

export const recentChart = {
  wrap: el.recWrap, scroll: el.recScroll, plot: el.recChart, axis: el.recAxis, tip: el.recTip,
  holder: rec,
  ready: () => !!rec.data,
  width: () => rec.width,
  plotW: () => rec.plotW,
  redraw: drawRecent,
  draw: scheduleRecentDraw,
  click: scheduleRecentDraw,
  // Shift sets range B whatever the radio buttons say.
  begin: (ev) => ({ which: ev.shiftKey ? "b" : rec.brush }),
  range: (from, to, drag) => {
    const d = rec.data;
    const t = (x) => d.start + (x / rec.plotW) * (d.end - d.start);
    setRecRange(drag.which, [t(from), t(to)]);
  },
  hasRange: () => !!(rec.a || rec.b),
  clear: () => clearRecRanges(false),
  describe: describeRecent,
};

/* The Recent view's events: its controls and its chart. */
export function wireRecent() {
  el.recSource.addEventListener("change", () => {
    rec.source = el.recSource.value;
    rec.a = null;
    rec.b = null;
    rec.brush = "a";
    el.recSpan.disabled = rec.source !== "live";
    loadRanges();
    writeHash();
    loadRecent();
  });
  el.recSpan.addEventListener("change", () => {
    rec.span = Number(el.recSpan.value) || 0;
    writeHash();
    loadRecent();
  });
  el.recRefresh.addEventListener("click", loadRecent);
  el.recKind.addEventListener("change", () => {
    rec.kind = el.recKind.value;
    page.valueWanted = RANGE_VALUE[rec.kind] || null;
    updateRecNote();
    writeHash();
    loadRanges();
  });
  el.recBrush.addEventListener("change", (ev) => { rec.brush = ev.target.value; });
  el.recClear.addEventListener("click", () => clearRecRanges(false));
  el.recClearB.addEventListener("click", () => clearRecRanges(true));
  wireChart(recentChart);
}
