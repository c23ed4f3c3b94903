/* The viewer's shared state: the page's elements (el), the profile shown
 * and how (state), the Recent view's (rec), and the page's view and what
 * its address asked for (page). Every other module reads and writes these;
 * nothing else is shared between them. */

const $ = (id) => document.getElementById(id);

/* Each chart (the timeline, the Recent chart) is the same parts, from
 * the page's template: a scrolled plot, a time axis and a tooltip. The
 * chart's div names their ids, the plot's label and its help. */
for (const wrap of document.querySelectorAll("div.chart")) {
  const parts = $("chart-parts").content.cloneNode(true);
  for (const part of parts.querySelectorAll("[data-part]")) part.id = wrap.dataset[part.dataset.part];
  const plot = parts.querySelector("[data-part=plot]");
  plot.setAttribute("aria-label", wrap.dataset.label);
  plot.setAttribute("aria-describedby", wrap.dataset.help);
  wrap.append(parts);
}
export const el = {
  form: $("fetch-form"), kinds: $("kinds"), seconds: $("seconds"), hz: $("hz"),
  cpuOptions: $("cpu-options"), heapOptions: $("heap-options"),
  heapIndex: $("heap-index"), fetch: $("fetch"), cancel: $("cancel"),
  file: $("file"), progress: $("progress"), error: $("error"),
  result: $("result"), meta: $("meta"), downloads: $("downloads"),
  valueType: $("value-type"), search: $("search"), match: $("match"),
  back: $("back"), reset: $("reset"), crumbs: $("crumbs"),
  wrap: $("graph-wrap"), canvas: $("graph"), tip: $("tip"), announce: $("announce"),
  top: $("top"), topCaption: $("top-caption"),
  timeline: $("timeline"), rangeNote: $("range-note"), wholeWindow: $("whole-window"),
  colorBy: $("color-by"), stateLegend: $("state-legend"), lanesWrap: $("lanes-wrap"),
  lanesScroll: $("lanes-scroll"), lanes: $("lanes"), axis: $("axis"), tlTip: $("tl-tip"),
  views: $("views"), recent: $("recent"), recSource: $("rec-source"), recSpan: $("rec-span"),
  recRefresh: $("rec-refresh"), recBrush: $("rec-brush"), recClear: $("rec-clear"), recKind: $("rec-kind"),
  recClearB: $("rec-clear-b"), recOff: $("rec-off"), recNote: $("rec-note"),
  recWrap: $("rec-wrap"), recScroll: $("rec-scroll"), recChart: $("rec-chart"),
  recAxis: $("rec-axis"), recTip: $("rec-tip"),
  delta: $("delta"), deltaTable: $("delta-table"), deltaCaption: $("delta-caption"),
  topTitle: $("top-title"),
};

export const state = {
  status: "idle", // idle | loading | ready | error
  profile: null, // the JSON as received
  source: null, // {kind, id} of the fetched profile, or {file}
  valueIndex: 0,
  model: null, // {root, nodes, funcs, total, skipped}
  focus: null, // the zoomed node
  history: [], // earlier focus nodes, for Back
  search: null, // RegExp or null
  matched: 0, // value of the frames the search matches
  sort: "flat",
  rows: [], // per drawn row: [{x, w, node}] sorted by x
  ancestors: [], // nodes drawn full width above the focus
  selected: null, // the frame chosen with the keyboard
  timings: { buildMs: 0, renderMs: 0, searchMs: 0, timelineMs: 0, laneDrawMs: 0 },
  controller: null,
  tl: null, // the profile's timeline, prepared (prepareTimeline), or null
  range: null, // [from, to] in ns from the window's start, or null: all of it
  drag: null, // a brush being dragged: {from, to} in plot pixels
  diff: null, // a difference shown: {sides, seconds: [A, B], ranges, ids}, or null
};

/* The Recent view's (recent.js): the record, its chart and its ranges. */
export const rec = {
  status: "idle", // idle | loading | ready | off | error
  info: null, // /record as received
  source: "live", // "live" or a saved recording's id
  kind: "profile", // what a range shows: profile (CPU), heap, allocs, mutex, block
  span: 300, // seconds shown of the live record; 0: all of it
  data: null, // the timeline, prepared (prepareRecent)
  a: null, // [start, end] Unix seconds, or null
  b: null,
  brush: "a", // what the next drag sets
  drag: null, // {from, to, canvas, which} in plot pixels
  cache: new Map(), // a range's profile: key -> {p, id}
  seq: 0, // the latest range load; older answers are dropped
  loadSeq: 0, // the latest timeline load, likewise
  controller: null,
  width: 0, plotW: 1, height: 0, rowsDrawn: 0,
};

export function unitOf() {
  const t = state.profile.sample_types[state.valueIndex] || {};
  return t.unit || "";
}

/* The page: the view shown, whether its address is being applied (no
 * writing it back meanwhile), and a sample type the address names, until
 * a profile has it. */
export const page = {
  view: "profile",
  applyingHash: false,
  valueWanted: null,
};
