/*
 * pullprof's flame graph viewer. Plain JavaScript, no build step, no other
 * origin: it fetches a profile as JSON from the agent that served this page
 * (?format=json on ../profile, ../heap, ../allocs, ../wall, ../fgprof,
 * ../goroutine, ../threadcreate, ../mutex, ../block),
 * merges the samples' stacks by function name into a tree and draws it on a
 * canvas, root at the top. Samples labelled with a thread state (wall-clock
 * profiles, thread dumps) hang under one "state: ..." frame per state, so
 * waiting and running time are told apart at a glance. A canvas keeps 50k-frame profiles smooth: only frames at least a
 * third of a pixel wide are drawn, and hit-testing uses the rectangles of
 * the last drawing.
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
 * window.pullprofViewer exposes the state for tests and the console.
 */
"use strict";

(function () {
  const ROW = 18; // CSS pixels per frame row
  const MIN_WIDTH = 0.35; // narrower frames (and their callees) are not drawn
  const LABEL_MIN = 28; // frames narrower than this get no label
  const TOP_ROWS = 200; // rows in the top-functions table

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
  const el = {
    form: $("fetch-form"), seconds: $("seconds"), hz: $("hz"),
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

  const state = {
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

  // ---- formatting ---------------------------------------------------------

  const intFmt = new Intl.NumberFormat("en-US");
  const pctFmt = new Intl.NumberFormat("en-US", { style: "percent", maximumFractionDigits: 2 });

  function scaled(v, steps) {
    let i = 0;
    let x = Math.abs(v);
    while (i + 1 < steps.length && x >= steps[i + 1][0]) i++;
    const n = v / steps[i][0];
    const digits = i === 0 ? 0 : Math.abs(n) < 10 ? 2 : Math.abs(n) < 100 ? 1 : 0;
    return n.toFixed(digits) + " " + steps[i][1];
  }

  function formatValue(v, unit) {
    switch (unit) {
      case "nanoseconds":
        return scaled(v, [[1, "ns"], [1e3, "µs"], [1e6, "ms"], [1e9, "s"]]);
      case "bytes":
        return scaled(v, [[1, "B"], [1024, "KiB"], [1048576, "MiB"], [1073741824, "GiB"]]);
      default:
        return intFmt.format(v) + (unit && unit !== "count" ? " " + unit : "");
    }
  }

  function percent(v, of) {
    return of ? pctFmt.format(v / of) : "–";
  }

  // ---- the model ------------------------------------------------------------

  function check(p) {
    const need = ["sample_types", "samples", "locations", "functions"];
    if (!p || typeof p !== "object")
      throw new Error("not a profile: the JSON is not an object");
    for (const k of need)
      if (!Array.isArray(p[k]))
        throw new Error(`not a pullprof JSON profile: "${k}" is missing`);
    if (!p.sample_types.length)
      throw new Error("the profile has no sample types");
  }

  /* Every location as the frames it stands for, outermost first (the
   * function the others were inlined into comes first). */
  function locationFrames(p) {
    const fns = p.functions;
    const maps = p.mappings || [];
    return p.locations.map((loc) => {
      const lines = loc.lines || [];
      if (!lines.length) {
        const m = loc.mapping >= 0 ? maps[loc.mapping] : null;
        return [{ name: loc.address || "(unknown)", file: m ? m.path : "", line: 0, unknown: true }];
      }
      const out = [];
      for (let i = lines.length - 1; i >= 0; i--) {
        const f = fns[lines[i].function] || {};
        out.push({ name: f.name || f.system_name || "(unnamed)", file: f.file || "", line: lines[i].line || 0, unknown: false });
      }
      return out;
    });
  }

  function newNode(name, parent, frame) {
    return {
      name, parent, value: 0, self: 0, x: 0, a: 0, b: 0,
      depth: parent ? parent.depth + 1 : 0, height: 0,
      file: frame ? frame.file : "", line: frame ? frame.line : 0,
      lineValues: null, unknown: frame ? frame.unknown : false,
      synthetic: name.startsWith("[pullprof:"), hit: false,
      state: frame ? frame.state || "" : "",
      kids: new Map(), children: null,
    };
  }

  /* The merged tree of value vi; weights (one per sample), when given,
   * stand for the samples' values: a time range's share of each. sides,
   * when given (a difference of two profiles merged into one), says which
   * side each sample comes from (0: A, 1: B): every node and function then
   * also sums each side apart, in a and b. */
  function build(p, vi, weights, sides) {
    const frames = locationFrames(p);
    const root = newNode("all", null, null);
    const funcs = new Map(); // name -> {name, file, line, flat, cum, mark}
    let skipped = 0;

    // Each frame's row of the top-functions table, found once per location
    // rather than once per frame of every sample.
    for (const chain of frames) {
      for (const f of chain) {
        let fn = funcs.get(f.name);
        if (!fn) {
          fn = { name: f.name, file: f.file, line: f.line, flat: 0, cum: 0, mark: -1, flatA: 0, flatB: 0, cumA: 0, cumB: 0 };
          funcs.set(f.name, fn);
        }
        f.fn = fn;
      }
    }

    // The thread state of a sample (wall-clock profiles and thread dumps
    // carry one): a frame of its own below the root.
    const stateNodes = new Map();
    const stateOf = (s) => {
      for (const l of s.labels || []) if (l.key === "state" && l.str) return l.str;
      return null;
    };

    p.samples.forEach((s, si) => {
      const v = weights ? weights[si] : Number(s.values[vi]) || 0;
      if (v <= 0) {
        if (v < 0) skipped++;
        return;
      }
      const locs = s.locations || [];
      let node = root;
      const side = sides ? (sides[si] ? "b" : "a") : null;
      root.value += v;
      if (side) root[side] += v;
      const st = stateOf(s);
      if (st) {
        let sn = stateNodes.get(st);
        if (!sn) {
          sn = newNode("state: " + st, root, { file: "", line: 0, unknown: false, state: st });
          stateNodes.set(st, sn);
          root.kids.set(sn, sn);
        }
        sn.value += v;
        if (side) sn[side] += v;
        node = sn;
      }
      for (let k = locs.length - 1; k >= 0; k--) {
        const chain = frames[locs[k]];
        if (!chain) continue;
        for (const f of chain) {
          // Keyed by the function's row object: one per name, and cheaper
          // to look up than the name itself.
          let c = node.kids.get(f.fn);
          if (!c) {
            c = newNode(f.name, node, f);
            node.kids.set(f.fn, c);
          } else if (c.lineValues || c.line !== f.line || c.file !== f.file) {
            // Several lines merged into one frame: keep each one's value,
            // to name the heaviest.
            if (!c.lineValues) c.lineValues = new Map([[c.file + ":" + c.line, c.value]]);
            const key = f.file + ":" + f.line;
            c.lineValues.set(key, (c.lineValues.get(key) || 0) + v);
          }
          c.value += v;
          if (side) c[side] += v;
          node = c;
          const fn = f.fn;
          if (fn.mark !== si) { // a recursive function counts once per sample
            fn.mark = si;
            fn.cum += v;
            if (side === "a") fn.cumA += v;
            else if (side === "b") fn.cumB += v;
          }
        }
      }
      node.self += v;
      if (node !== root && !node.state) {
        const fn = funcs.get(node.name);
        fn.flat += v;
        if (side === "a") fn.flatA += v;
        else if (side === "b") fn.flatB += v;
      }
    });

    // Children in name order, positions, depths; pre-order without recursion
    // (stacks can be deep).
    const nodes = [];
    const stack = [root];
    while (stack.length) {
      const n = stack.pop();
      nodes.push(n);
      n.children = Array.from(n.kids.values()).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      n.kids = null;
      let x = n.x;
      for (const c of n.children) {
        c.x = x;
        x += c.value;
      }
      for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i]);
    }
    for (let i = nodes.length - 1; i > 0; i--) {
      const n = nodes[i];
      if (n.height + 1 > n.parent.height) n.parent.height = n.height + 1;
    }
    return { root, nodes, funcs: Array.from(funcs.values()), total: root.value, skipped };
  }

  // ---- drawing --------------------------------------------------------------

  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
    return h >>> 0;
  }

  const SYNTHETIC_COLOR = "hsl(0, 0%, 68%)";
  const UNKNOWN_COLOR = "hsl(210, 20%, 70%)";
  const colorCache = new Map();
  /* A function's colour: warm, from a hash of its name, so it is the same
   * in every drawing (flame graph and timeline) and every profile. */
  function nameColor(name, unknown) {
    if (name.startsWith("[pullprof:")) return SYNTHETIC_COLOR;
    if (unknown) return UNKNOWN_COLOR;
    let c = colorCache.get(name);
    if (!c) {
      const h = hash(name);
      c = `hsl(${10 + (h % 40)}, ${70 + ((h >>> 8) % 20)}%, ${58 + ((h >>> 16) % 14)}%)`;
      colorCache.set(name, c);
    }
    return c;
  }

  /* A thread state's colour (the states of /proc's task state, as the
   * agent names them): running red, sleeping blue, waiting on a disk
   * purple, the rare others in greens. */
  const STATE_COLORS = {
    running: "hsl(4, 75%, 62%)",
    sleeping: "hsl(212, 60%, 68%)",
    "disk-sleep": "hsl(280, 45%, 64%)",
    idle: "hsl(200, 25%, 72%)",
  };
  function stateColor(st) {
    return STATE_COLORS[st] || `hsl(${120 + (hash(st) % 60)}, 40%, 58%)`;
  }

  /* A frame's colour in a difference: red where B is hotter than A, blue
   * where it is cooler, the deeper the larger the change against the
   * frame's own size; grey-white when about equal. */
  function diffColor(n) {
    const sum = n.a + n.b;
    const d = sum > 0 ? (n.b - n.a) / sum : 0; // -1 (only in A) .. 1 (only in B)
    const dark = window.matchMedia("(prefers-color-scheme: dark)").matches;
    const k = Math.min(1, Math.abs(d));
    if (k < 0.02) return dark ? "hsl(0, 0%, 78%)" : "hsl(0, 0%, 90%)";
    const light = (dark ? 80 : 92) - k * (dark ? 28 : 40);
    return d > 0 ? `hsl(2, 80%, ${light}%)` : `hsl(215, 80%, ${light}%)`;
  }

  function frameColor(n) {
    if (state.diff) return diffColor(n);
    if (n.synthetic) return SYNTHETIC_COLOR;
    if (n.state) return stateColor(n.state);
    return nameColor(n.name, n.unknown);
  }

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  /* fn, run at the next frame once however often it is asked for until then. */
  function perFrame(fn) {
    let pending = 0;
    return () => {
      if (!pending) pending = requestAnimationFrame(() => { pending = 0; fn(); });
    };
  }

  const scheduleRender = perFrame(() => render());

  /* cv sized to width × height CSS pixels at the screen's density, and its
   * context: cleared, drawing in CSS pixels. */
  function sizedContext(cv, width, height) {
    const dpr = window.devicePixelRatio || 1;
    cv.width = Math.round(width * dpr);
    cv.height = Math.round(height * dpr);
    cv.style.width = width + "px";
    cv.style.height = height + "px";
    const ctx = cv.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    return ctx;
  }

  function render() {
    const m = state.model;
    if (!m) return;
    const t0 = performance.now();
    const focus = state.focus;
    const ancestors = [];
    for (let a = focus.parent; a; a = a.parent) ancestors.unshift(a);
    state.ancestors = ancestors;

    const cv = el.canvas;
    const width = Math.max(200, el.wrap.clientWidth);
    const rowsN = ancestors.length + focus.height + 1;
    const height = Math.max(rowsN, 1) * ROW;
    const ctx = sizedContext(cv, width, height);
    ctx.font = "12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
    ctx.textBaseline = "middle";
    const charW = ctx.measureText("M").width || 7;
    const textColor = cssVar("--frame-text");
    const matchColor = cssVar("--match");
    const dimColor = cssVar("--dim");
    const fgColor = cssVar("--fg");
    const rows = [];
    for (let i = 0; i < rowsN; i++) rows.push([]);

    const box = (n, x, w, row, fill, ink) => {
      const y = row * ROW;
      ctx.fillStyle = fill;
      ctx.fillRect(x, y, Math.max(w - (w > 3 ? 1 : 0), 0.5), ROW - 1);
      rows[row].push({ x, w, node: n });
      if (w >= LABEL_MIN) {
        const fit = Math.floor((w - 6) / charW);
        const label = n.name.length <= fit ? n.name : n.name.slice(0, Math.max(fit - 1, 1)) + "…";
        ctx.fillStyle = ink;
        ctx.fillText(label, x + 3, y + ROW / 2);
      }
    };

    ancestors.forEach((a, i) => box(a, 0, width, i, dimColor, fgColor));
    if (focus.value > 0) {
      const scale = width / focus.value;
      const x0 = focus.x;
      const base = ancestors.length - focus.depth;
      const stack = [focus];
      while (stack.length) {
        const n = stack.pop();
        const w = n.value * scale;
        if (w < MIN_WIDTH) continue;
        const hit = state.search && n.hit;
        box(n, (n.x - x0) * scale, w, base + n.depth, hit ? matchColor : frameColor(n), textColor);
        for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i]);
      }
    } else {
      ctx.fillStyle = fgColor;
      ctx.fillText("no samples with a value of this type", 8, ROW / 2);
    }
    state.rows = rows;
    const sel = state.selected && boxOf(state.selected);
    if (sel) {
      ctx.strokeStyle = cssVar("--focus");
      ctx.lineWidth = 2;
      ctx.strokeRect(sel.x + 1, sel.y + 1, Math.max(sel.w - 2, 1), ROW - 3);
    }
    state.timings.renderMs = performance.now() - t0;
    cv.dataset.focus = focus.name;
    cv.dataset.frames = String(rows.reduce((s, r) => s + r.length, 0));
  }

  /* Where n was drawn (canvas CSS pixels), or null. */
  function boxOf(n) {
    for (let row = 0; row < state.rows.length; row++)
      for (const b of state.rows[row])
        if (b.node === n) return { x: b.x, y: row * ROW, w: b.w };
    return null;
  }

  function hitTest(ev) {
    const r = el.canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    const row = Math.floor((ev.clientY - r.top) / ROW);
    const list = state.rows[row];
    if (!list) return null;
    let lo = 0;
    let hi = list.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const b = list[mid];
      if (x < b.x) hi = mid - 1;
      else if (x >= b.x + Math.max(b.w, 1)) lo = mid + 1;
      else return b.node;
    }
    return null;
  }

  // ---- the timeline -----------------------------------------------------------

  const LANE = 14; // CSS pixels per thread's lane
  const LANE_GAP = 2;
  const GUTTER = 190; // the lanes' names, left of the plot
  const PLOT_END = 10; // margin right of the plot
  const AXIS_H = 20;

  function labelOf(s, key) {
    for (const l of s.labels || []) if (l.key === key && typeof l.str === "string") return l.str;
    return null;
  }

  const secs = (ns) => (ns / 1e9).toFixed(2) + " s";

  /* The profile's timeline, ready to draw and to filter by, or null when it
   * has none: the events in typed arrays; one lane per thread (the busiest
   * first; the process's lost samples, tid 0, last); each sample's colour
   * as an index into a palette, by its leaf function and by its thread
   * state. An event the profile cannot back (a sample index out of range)
   * is left out and counted. */
  function prepareTimeline(p) {
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
  function rangeWeights(vi) {
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

  function updateRangeNote() {
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

  /* Text cut to fit width pixels, with an ellipsis. */
  function fitText(ctx, text, width) {
    if (ctx.measureText(text).width <= width) return text;
    let lo = 0;
    let hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (ctx.measureText(text.slice(0, mid) + "…").width <= width) lo = mid;
      else hi = mid - 1;
    }
    return text.slice(0, lo) + "…";
  }

  /* A chart's width in its wrap, and its plot's, right of the rows' names. */
  function chartWidths(wrap) {
    const width = Math.max(GUTTER + 100, wrap.clientWidth);
    return [width, Math.max(1, Math.floor(width - GUTTER - PLOT_END))];
  }

  /* A chart's canvas, sized, with the context its rows are drawn in. */
  function chartContext(cv, width, height) {
    const ctx = sizedContext(cv, width, height);
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    return ctx;
  }

  /* A chart's row from y, h high: its band across the plot, its name in
   * ink left of it. */
  function chartRow(ctx, y, h, plotW, label, ink, panel) {
    ctx.fillStyle = panel;
    ctx.fillRect(GUTTER, y, plotW, h);
    ctx.fillStyle = ink;
    ctx.fillText(fitText(ctx, label, GUTTER - 12), 6, y + h / 2);
  }

  /* A chart's time axis on cv, width wide: its title at the left, then a
   * tick at every multiple of step from ax.from to ax.to (the plot's ends,
   * in the chart's time), step the first of ax.steps at least ax.gap
   * pixels apart, labelled ax.label(t, step). A label that would cover the
   * one before it is left out. The context, to shade the ranges on. */
  function drawAxis(cv, width, plotW, ax) {
    const a = sizedContext(cv, width, AXIS_H);
    a.font = "11px system-ui, sans-serif";
    a.textBaseline = "middle";
    a.fillStyle = cssVar("--muted");
    a.fillText(ax.title, 6, AXIS_H / 2);
    const scale = plotW / (ax.to - ax.from);
    const step = ax.steps.find((st) => st * scale >= ax.gap) || ax.steps[ax.steps.length - 1];
    let free = 0; // where the last label ended
    for (let t = Math.ceil(ax.from / step) * step; t <= ax.to; t += step) {
      const x = GUTTER + (t - ax.from) * scale;
      a.fillRect(Math.round(x), 0, 1, 5);
      const label = ax.label(t, step);
      const w = a.measureText(label).width;
      const lx = Math.min(x + 3, width - w - 2);
      if (lx < free) continue;
      a.fillText(label, lx, AXIS_H / 2 + 2);
      free = lx + w + 6;
    }
    return a;
  }

  /* The lanes, drawn once into an offscreen canvas (again on a resize, a
   * colour change or a colour scheme change); brushing only composes it
   * with the range on top. Each pixel column of a lane takes the colour
   * most of its samples have (a majority vote), so a hundred thousand
   * samples come down to at most one rectangle per column and lane, drawn
   * colour by colour. */
  function drawLanes() {
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

  function composeTimeline() {
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

  function showTimeline() {
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

  /* Plot pixels from the left of the plot, for a mouse event. */
  function plotX(ev, canvas) {
    return ev.clientX - canvas.getBoundingClientRect().left - GUTTER;
  }

  /* A chart (the timeline, the Recent chart) is wired by wireChart from
   * what c says of it: its parts (wrap, scroll, plot, axis, tip); whose
   * brush it is (c.holder.drag: {from, to, canvas} in plot pixels, and
   * what c.begin(ev) adds); whether it is drawn (c.ready), its width and
   * its plot's (c.width, c.plotW); how to draw it again (c.redraw), and
   * at the next frame with the brush (c.draw); what a drag across it ends
   * in: c.click() for a click, c.range(from, to, drag) for a range (plot
   * pixels, from < to); whether it shows a range (c.hasRange) and how to
   * drop it (c.clear); and the tooltip's lines (c.describe). */

  /* Dragging across a chart's plot or axis: the mousedown handler. */
  function brushing(c) {
    const clamp = (x) => Math.max(0, Math.min(c.plotW(), x));
    function move(ev) {
      if (!c.holder.drag) return;
      c.holder.drag.to = clamp(plotX(ev, c.holder.drag.canvas));
      c.draw();
    }
    function end(ev) {
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", end);
      const d = c.holder.drag;
      if (!d) return;
      d.to = clamp(plotX(ev, d.canvas));
      c.holder.drag = null;
      // A click is not a range: it keeps the one there is.
      if (Math.abs(d.to - d.from) < 3) c.click();
      else c.range(Math.min(d.from, d.to), Math.max(d.from, d.to), d);
    }
    return (ev) => {
      if (!c.ready() || ev.button !== 0) return;
      const canvas = ev.currentTarget;
      const x = plotX(ev, canvas);
      if (x < -8) return; // on the rows' names
      ev.preventDefault(); // no text selection
      if (canvas === c.plot) canvas.focus({ preventScroll: true });
      c.tip.hidden = true;
      c.holder.drag = Object.assign({ from: clamp(x), to: clamp(x), canvas }, c.begin ? c.begin(ev) : null);
      window.addEventListener("mousemove", move);
      window.addEventListener("mouseup", end);
      c.draw();
    };
  }

  /* Shows tip by the mouse in wrap: right of it and below, or left of it
   * where it would not fit. */
  function placeTip(tip, wrap, ev) {
    tip.hidden = false;
    const wr = wrap.getBoundingClientRect();
    let left = ev.clientX - wr.left + 14;
    if (left + tip.offsetWidth > wr.width) left = Math.max(0, ev.clientX - wr.left - tip.offsetWidth - 14);
    tip.style.left = left + "px";
    tip.style.top = ev.clientY - wr.top + 16 + "px";
  }

  /* A chart's tooltip: the mousemove handler. c.describe(line, x, y, onPlot)
   * writes its lines with line(text, bold) for the point x, y of the plot
   * (onPlot) or of the axis, and returns the hint written last, or null
   * for no tooltip there. */
  function chartHover(c) {
    return (ev) => {
      if (!c.ready() || c.holder.drag) return;
      const cv = ev.currentTarget;
      const r = cv.getBoundingClientRect();
      const x = ev.clientX - r.left - GUTTER;
      const tip = c.tip;
      if (x < 0 || x > c.plotW()) {
        tip.hidden = true;
        return;
      }
      tip.replaceChildren();
      const line = (text, bold) => {
        const e = document.createElement(bold ? "b" : "div");
        e.textContent = text;
        tip.append(e);
      };
      const hint = c.describe(line, x, ev.clientY - r.top, cv === c.plot);
      if (hint === null) {
        tip.hidden = true;
        return;
      }
      line(hint);
      tip.lastChild.className = "where";
      placeTip(tip, c.wrap, ev);
    };
  }

  /* Its events: brushing, the tooltip, Escape or a double click dropping
   * the range, drawing again at a new width. */
  function wireChart(c) {
    const start = brushing(c);
    const hover = chartHover(c);
    const hide = () => { c.tip.hidden = true; };
    for (const cv of [c.plot, c.axis]) {
      cv.addEventListener("mousedown", start);
      cv.addEventListener("dblclick", () => c.clear());
      cv.addEventListener("mousemove", hover);
      cv.addEventListener("mouseleave", hide);
    }
    c.plot.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && c.hasRange()) {
        ev.preventDefault();
        c.clear();
      }
    });
    c.plot.addEventListener("blur", hide);
    c.scroll.addEventListener("scroll", hide);
    new ResizeObserver(() => {
      if (c.ready() && c.wrap.clientWidth !== c.width()) c.redraw();
    }).observe(c.wrap);
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => c.redraw());
  }

  /* The viewport y of the middle of a chart's row from top, h high,
   * scrolled into view first. */
  function chartRowY(c, top, h) {
    const sc = c.scroll;
    if (top < sc.scrollTop || top + h > sc.scrollTop + sc.clientHeight)
      sc.scrollTop = Math.max(0, top - sc.clientHeight / 2);
    c.wrap.scrollIntoView({ block: "nearest" });
    return c.plot.getBoundingClientRect().top + top + h / 2;
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

  // ---- interaction ------------------------------------------------------------

  function unitOf() {
    const t = state.profile.sample_types[state.valueIndex] || {};
    return t.unit || "";
  }

  function where(n) {
    if (!n.file) return n.unknown ? "address not symbolized" : "";
    if (!n.lineValues) return n.file + (n.line ? ":" + n.line : "");
    let best = null;
    let bestValue = -1;
    for (const [k, v] of n.lineValues) {
      if (v > bestValue) {
        best = k;
        bestValue = v;
      }
    }
    return `${best} (the heaviest of ${n.lineValues.size} lines: ${percent(bestValue, n.value)})`;
  }

  function showTip(n, ev) {
    const tip = el.tip;
    const m = state.model;
    const unit = unitOf();
    tip.replaceChildren();
    const name = document.createElement("b");
    name.textContent = n.name;
    tip.append(name);
    const w = where(n);
    if (w) {
      const d = document.createElement("div");
      d.className = "where";
      d.textContent = w;
      tip.append(d);
    }
    if (state.diff) {
      const d = document.createElement("div");
      const delta = n.b - n.a;
      d.textContent = `A ${formatValue(n.a, unit)}/s · B ${formatValue(n.b, unit)}/s · ` +
        `B − A ${delta > 0 ? "+" : delta < 0 ? "−" : "±"}${formatValue(Math.abs(delta), unit)}/s` +
        (n.a > 0 ? ` (${delta >= 0 ? "+" : "−"}${pctFmt.format(Math.abs(delta) / n.a)})` : n.b > 0 ? " (only in B)" : "");
      tip.append(d);
      placeTip(tip, el.wrap, ev);
      return;
    }
    const v = document.createElement("div");
    let text = `${formatValue(n.value, unit)} · ${percent(n.value, m.total)} of the total`;
    if (state.focus !== m.root && state.focus !== n && !state.ancestors.includes(n))
      text += ` · ${percent(n.value, state.focus.value)} of ${state.focus.name}`;
    v.textContent = text;
    tip.append(v);
    if (n.self) {
      const s = document.createElement("div");
      s.textContent = `self ${formatValue(n.self, unit)} (${percent(n.self, m.total)})`;
      tip.append(s);
    }
    placeTip(tip, el.wrap, ev);
  }

  function zoom(n, remember) {
    if (!n || n === state.focus) return;
    if (remember) state.history.push(state.focus);
    state.focus = n;
    updateZoomControls();
    render();
  }

  function back() {
    if (state.history.length) {
      state.focus = state.history.pop();
      updateZoomControls();
      render();
    }
  }

  function resetZoom() {
    if (state.focus !== state.model.root) {
      state.history = [];
      state.focus = state.model.root;
      updateZoomControls();
      render();
    }
  }

  function updateZoomControls() {
    const root = state.model.root;
    el.back.disabled = !state.history.length;
    el.reset.disabled = state.focus === root;
    el.crumbs.replaceChildren();
    if (state.focus === root) return;
    const path = [];
    for (let a = state.focus; a; a = a.parent) path.unshift(a);
    el.crumbs.append("Zoomed: ");
    path.forEach((n, i) => {
      if (i) el.crumbs.append(" › ");
      if (n === state.focus) {
        const s = document.createElement("strong");
        s.textContent = n.name;
        el.crumbs.append(s);
      } else {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = n.name;
        b.addEventListener("click", () => zoom(n, true));
        el.crumbs.append(b);
      }
    });
  }

  function setSearch(text) {
    const t0 = performance.now();
    const m = state.model;
    state.search = null;
    state.matched = 0;
    if (text) {
      try {
        state.search = new RegExp(text, "i");
      } catch (e) {
        state.search = new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i");
      }
    }
    const hits = new Map();
    for (const n of m.nodes) {
      if (!state.search) {
        n.hit = false;
        continue;
      }
      let h = hits.get(n.name);
      if (h === undefined) {
        h = state.search.test(n.name);
        hits.set(n.name, h);
      }
      n.hit = h;
    }
    // The matched share: a frame under a matched frame is already counted.
    if (state.search) {
      const stack = [m.root];
      while (stack.length) {
        const n = stack.pop();
        if (n.hit) state.matched += n.value;
        else for (const c of n.children) stack.push(c);
      }
      el.match.textContent = `matched ${formatValue(state.matched, unitOf())} · ${percent(state.matched, m.total)} of the total`;
    } else {
      el.match.textContent = "";
    }
    document.body.dataset.matched = state.search ? String(state.matched) : "";
    for (const tr of [...el.top.tBodies[0].rows, ...el.deltaTable.tBodies[0].rows])
      tr.classList.toggle("hit", !!state.search && state.search.test(tr.dataset.name));
    if (!applyingHash) writeHash();
    render();
    state.timings.searchMs = performance.now() - t0; // matching and drawing
  }

  /* A function table's head: its own columns (a column with a sort key is
   * a button sorting the table by it), then the function and where it is,
   * the cells fillRows ends each row with. */
  function tableHead(table, columns) {
    const tr = document.createElement("tr");
    for (const [text, sort] of columns.concat([["Function"], ["Location"]])) {
      const th = document.createElement("th");
      th.scope = "col";
      if (sort) {
        const b = document.createElement("button");
        b.type = "button";
        b.dataset.sort = sort;
        b.textContent = text;
        th.append(b);
      } else {
        th.textContent = text;
      }
      tr.append(th);
    }
    table.tHead.append(tr);
  }

  /* A function table's rows, the first TOP_ROWS functions of list: the
   * cells cellsOf(f, tr) gives (it may mark the row too), the function and
   * where it is; the caption says how many and by what they are sorted. */
  function fillRows(table, caption, list, sortedBy, cellsOf) {
    const body = document.createElement("tbody");
    for (const f of list.slice(0, TOP_ROWS)) {
      const tr = document.createElement("tr");
      tr.tabIndex = 0;
      tr.dataset.name = f.name;
      tr.title = "Highlight " + f.name + " in the flame graph";
      const cells = cellsOf(f, tr).concat(f.name, f.file ? f.file + (f.line ? ":" + f.line : "") : "");
      for (const c of cells) {
        const td = document.createElement("td");
        td.textContent = c;
        tr.append(td);
      }
      if (state.search && state.search.test(f.name)) tr.classList.add("hit");
      body.append(tr);
    }
    table.tBodies[0].replaceWith(body);
    caption.textContent = `${list.length > TOP_ROWS ? "The top " + TOP_ROWS + " of " : ""}${intFmt.format(list.length)} functions by ${sortedBy}. Select a row to highlight the function.`;
  }

  /* A difference's table: each function's value per second of A and of B
   * (cumulative: the function and its callees) and the change, the largest
   * changes first, hotter or cooler alike. */
  function fillDeltaTable() {
    const m = state.model;
    const unit = unitOf();
    const signed = (v) => (v > 0 ? "+" : v < 0 ? "−" : "±") + formatValue(Math.abs(v), unit);
    const change = (f) => f.cumB - f.cumA;
    const list = m.funcs.filter((f) => f.cumA || f.cumB)
      .sort((x, y) => Math.abs(change(y)) - Math.abs(change(x)) || (x.name < y.name ? -1 : 1));
    fillRows(el.deltaTable, el.deltaCaption, list,
      "the change of their cumulative value per second, B − A: hotter in B first as much as cooler", (f, tr) => {
        const delta = change(f);
        tr.dataset.a = String(f.cumA);
        tr.dataset.b = String(f.cumB);
        tr.dataset.delta = String(delta);
        tr.className = delta > 0 ? "hotter" : delta < 0 ? "cooler" : "";
        return [
          signed(delta), formatValue(f.cumA, unit), formatValue(f.cumB, unit),
          f.cumA ? (delta >= 0 ? "+" : "−") + pctFmt.format(Math.abs(delta) / f.cumA) : "new in B",
        ];
      });
  }

  function fillTable() {
    const diff = !!state.diff;
    el.delta.hidden = !diff;
    el.top.hidden = diff;
    el.topTitle.hidden = diff;
    if (diff) {
      fillDeltaTable();
      return;
    }
    const m = state.model;
    const unit = unitOf();
    const key = state.sort;
    const list = m.funcs.filter((f) => f.flat || f.cum).sort((a, b) => b[key] - a[key] || b.cum - a.cum || (a.name < b.name ? -1 : 1));
    fillRows(el.top, el.topCaption, list, `${key === "flat" ? "flat (own)" : "cumulative"} value`, (f) => [
      formatValue(f.flat, unit), percent(f.flat, m.total),
      formatValue(f.cum, unit), percent(f.cum, m.total),
    ]);
    for (const b of el.top.querySelectorAll("th button"))
      b.setAttribute("aria-pressed", String(b.dataset.sort === key));
  }

  function describe() {
    const p = state.profile;
    const m = state.model;
    const unit = unitOf();
    const parts = [];
    const t = p.sample_types[state.valueIndex];
    if (state.diff) {
      const d = state.diff;
      el.meta.textContent = `Difference, per second of each range: B ${rangeText(d.ranges[1])} ` +
        `(${formatValue(m.root.b, unit)}/s of ${t.type}) against A ${rangeText(d.ranges[0])} ` +
        `(${formatValue(m.root.a, unit)}/s) · width: A and B together · red: hotter in B, blue: cooler`;
      el.meta.title = "";
      el.downloads.replaceChildren("Download A and B:");
      ["A", "B"].forEach((side, i) => {
        if (!d.ids[i]) return;
        const a = document.createElement("a");
        const k = state.source.kind || "profile";
        a.href = `../${k}?id=${encodeURIComponent(d.ids[i])}&format=pprof`;
        a.textContent = side + " (pprof)";
        a.download = `${k}-${side}-${d.ids[i]}.pb.gz`;
        el.downloads.append(" ", a);
      });
      return;
    }
    parts.push(`${t.type} (${t.unit}) total ${formatValue(m.total, unit)}`);
    const counted = p.sample_types.findIndex((st) => st.type === "samples" && st.unit === "count");
    if (state.range && state.tl)
      parts.push(`${intFmt.format(state.tl.rangeSamples)} samples in the time range ${secs(state.range[0])} – ${secs(state.range[1])}`);
    else if (counted >= 0 && Array.isArray(p.totals) && p.totals[counted] != null)
      parts.push(`${intFmt.format(p.totals[counted])} samples taken`);
    else
      parts.push(`${intFmt.format(p.samples.length)} sample records`);
    parts.push(`${intFmt.format(m.nodes.length - 1)} frames in the graph`);
    if (p.duration_nanos) parts.push(`over ${formatValue(p.duration_nanos, "nanoseconds")}`);
    if (p.time_nanos) parts.push("taken " + new Date(p.time_nanos / 1e6).toLocaleString());
    if (m.skipped)
      parts.push(m.skipped === 1 ? "1 sample with a negative value left out" : `${intFmt.format(m.skipped)} samples with negative values left out`);
    el.meta.textContent = parts.join(" · ");
    el.meta.title = (p.comments || []).join("\n");

    el.downloads.replaceChildren();
    const src = state.source || {};
    if (src.id) {
      // The value shown is the one the text and folded files hold, and the
      // one a pprof UI opens on.
      el.downloads.append("Download this profile:");
      const formats = [["pprof", "pprof", ".pb.gz"], ["folded", "folded", ".folded.txt"], ["text", "text", ".txt"], ["json", "JSON", ".json"]];
      const value = encodeURIComponent(t.type);
      for (const [fmt, label, ext] of formats) {
        const a = document.createElement("a");
        a.href = `../${src.kind}?id=${encodeURIComponent(src.id)}&format=${fmt}&sample_index=${value}`;
        a.textContent = label;
        a.download = `${src.kind}-${src.id}${ext}`;
        el.downloads.append(" ", a);
      }
    } else if (src.kind) {
      el.downloads.textContent = "(the agent gave no profile id: no download links)";
    }
  }

  function fillValueTypes() {
    el.valueType.replaceChildren();
    state.profile.sample_types.forEach((t, i) => {
      const o = document.createElement("option");
      o.value = String(i);
      o.textContent = `${t.type} (${t.unit})`;
      el.valueType.append(o);
    });
    el.valueType.value = String(state.valueIndex);
  }

  /* A difference's weights: each sample's value per second of its range. */
  function diffWeights(vi) {
    const d = state.diff;
    const samples = state.profile.samples;
    const w = new Float64Array(samples.length);
    samples.forEach((s, i) => {
      w[i] = (Number(s.values[vi]) || 0) / d.seconds[d.sides[i]];
    });
    return w;
  }

  /* Two profiles as one, for a difference: their tables end to end, B's
   * indices moved past A's; sides[i] says which one sample i comes from. */
  function mergeProfiles(pa, pb) {
    const nf = pa.functions.length;
    const nl = pa.locations.length;
    const nm = (pa.mappings || []).length;
    const locsB = pb.locations.map((loc) => Object.assign({}, loc, {
      mapping: loc.mapping >= 0 ? loc.mapping + nm : loc.mapping,
      lines: (loc.lines || []).map((l) => Object.assign({}, l, { function: l.function + nf })),
    }));
    const samplesB = pb.samples.map((sm) => Object.assign({}, sm, {
      locations: (sm.locations || []).map((li) => li + nl),
      // B's values in A's order of sample types.
      values: pa.sample_types.map((t) => {
        const k = pb.sample_types.findIndex((u) => u.type === t.type && u.unit === t.unit);
        return k >= 0 ? sm.values[k] : 0;
      }),
    }));
    const sides = new Uint8Array(pa.samples.length + pb.samples.length);
    sides.fill(1, pa.samples.length);
    return {
      p: {
        sample_types: pa.sample_types, default_sample_type: pa.default_sample_type,
        period_type: pa.period_type, period: pa.period,
        functions: pa.functions.concat(pb.functions),
        mappings: (pa.mappings || []).concat(pb.mappings || []),
        locations: pa.locations.concat(locsB),
        samples: pa.samples.concat(samplesB),
        comments: [],
      },
      sides,
    };
  }

  function useValue(i) {
    const t0 = performance.now();
    state.valueIndex = i;
    state.model = state.diff
      ? build(state.profile, i, diffWeights(i), state.diff.sides)
      : build(state.profile, i, rangeWeights(i));
    state.timings.buildMs = performance.now() - t0;
    state.focus = state.model.root;
    state.history = [];
    state.selected = null;
    el.result.hidden = false;
    updateRangeNote();
    describe();
    fillTable();
    updateZoomControls();
    setSearch(el.search.value); // renders
  }

  /* Show a profile (the parsed JSON). wantType: a sample type's name to
   * show first, when the profile has it. */
  function load(p, source, wantType, diff) {
    check(p);
    state.profile = p;
    state.diff = diff || null;
    state.source = source || {};
    let vi = p.sample_types.findIndex((t) => t.type === wantType);
    if (vi < 0) vi = Number.isInteger(p.default_sample_type) && p.sample_types[p.default_sample_type] ? p.default_sample_type : p.sample_types.length - 1;
    fillValueTypes();
    el.valueType.value = String(vi);
    state.range = null;
    state.drag = null;
    state.tl = diff ? null : prepareTimeline(p);
    el.timeline.hidden = !state.tl;
    useValue(vi);
    showTimeline();
    setStatus("ready");
  }

  function setStatus(s) {
    state.status = s;
    document.body.dataset.state = s;
  }

  function showError(title, detail) {
    el.error.replaceChildren();
    const t = document.createElement("strong");
    t.textContent = title;
    el.error.append(t);
    if (detail) el.error.append(detail.trim());
    el.error.hidden = false;
    el.progress.textContent = "";
    setStatus("error");
  }

  // ---- fetching ---------------------------------------------------------------

  function kind() {
    return el.form.elements.kind.value;
  }

  /* Kinds sampled over a window (seconds, hz), and the heap's. */
  const timed = (k) => k === "profile" || k === "wall" || k === "fgprof";
  const heapKind = (k) => k === "heap" || k === "allocs";

  function syncForm() {
    const cpu = timed(kind());
    el.cpuOptions.hidden = !cpu;
    el.heapOptions.hidden = !heapKind(kind());
    if (!cpu && kind() === "allocs" && el.heapIndex.value.startsWith("inuse"))
      el.heapIndex.value = "alloc_space";
    if (kind() === "heap" && el.heapIndex.value.startsWith("alloc"))
      el.heapIndex.value = "inuse_space";
  }

  function busy(on) {
    el.fetch.disabled = on;
    el.cancel.hidden = !on;
    el.file.disabled = on;
  }

  /* The agent's answer to a failed request: its sentence when it gave one. */
  async function answerText(resp) {
    let body = await resp.text();
    if ((resp.headers.get("Content-Type") || "").startsWith("application/json")) {
      try { body = JSON.parse(body).error || body; } catch (e) { /* keep the text */ }
    }
    return body.trim();
  }

  /* Fetch a profile of the kind chosen, or (id) one the agent kept: the
   * address of a page that showed it. */
  async function fetchProfile(id) {
    const k = kind();
    const q = new URLSearchParams();
    let seconds = 0;
    if (id) {
      q.set("id", id);
    } else if (timed(k)) {
      if (!el.seconds.reportValidity() || !el.hz.reportValidity()) return;
      seconds = Number(el.seconds.value);
      q.set("seconds", el.seconds.value);
      q.set("hz", el.hz.value);
    }
    q.set("format", "json");
    const url = `../${k}?${q}`;
    const controller = new AbortController();
    state.controller = controller;
    el.error.hidden = true;
    setStatus("loading");
    busy(true);
    const started = Date.now();
    const tick = () => {
      const left = Math.ceil(seconds - (Date.now() - started) / 1000);
      const what = k === "wall" || k === "fgprof" ? "every thread" : "the CPU";
      el.progress.textContent = left > 0 ? `Sampling ${what}: ${left} s left…` : "Waiting for the agent…";
    };
    tick();
    const timer = seconds ? setInterval(tick, 1000) : 0;
    try {
      const resp = await fetch(url, { signal: controller.signal, cache: "no-store" });
      const type = resp.headers.get("Content-Type") || "";
      if (!resp.ok) {
        let body = await answerText(resp);
        const retry = resp.headers.get("Retry-After");
        if (retry && !/retry/i.test(body)) body += `\n(The agent asks to retry in ${retry} s.)`;
        showError(`The agent answered ${resp.status} ${resp.statusText}`, body);
        return;
      }
      if (!type.startsWith("application/json")) {
        showError("The agent did not answer JSON", `${url} answered ${type || "no Content-Type"}; this agent may not support format=json.`);
        return;
      }
      const got = resp.headers.get("X-Pullprof-Profile-Id") || id;
      const p = await resp.json();
      el.progress.textContent = "Building the flame graph…";
      const want = valueWanted || (heapKind(k) ? el.heapIndex.value : null);
      valueWanted = null;
      load(p, { kind: k, id: got }, want);
      writeHash();
      el.progress.textContent = `Fetched ${url} in ${((Date.now() - started) / 1000).toFixed(1)} s.`;
    } catch (e) {
      if (e.name === "AbortError") {
        el.progress.textContent = "Cancelled.";
        setStatus(state.model ? "ready" : "idle");
      } else {
        showError("Could not get the profile", String(e.message || e));
      }
    } finally {
      clearInterval(timer);
      busy(false);
      state.controller = null;
    }
  }

  function openFile() {
    const f = el.file.files[0];
    if (!f) return;
    el.error.hidden = true;
    setStatus("loading");
    el.progress.textContent = `Reading ${f.name}…`;
    f.text().then((text) => {
      load(JSON.parse(text), { file: f.name });
      el.progress.textContent = `Opened ${f.name}.`;
    }).catch((e) => showError(`Could not open ${f.name}`, String(e.message || e)));
  }

  // ---- the Recent view: the record's last minutes --------------------------

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
  const rec = {
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

  const clock = (t) => {
    const d = new Date(t * 1000);
    const pad = (n) => String(n).padStart(2, "0");
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  };
  const clockTenths = (t) => clock(t) + "." + Math.floor(((t % 1) + 1) % 1 * 10);
  function rangeText(r) {
    return `${clockTenths(r[0])}–${clockTenths(r[1])} (${(r[1] - r[0]).toFixed(1)} s)`;
  }
  const secText = (t) => t.toFixed(3);

  function setRecStatus(st) {
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

  function prepareRecent(j) {
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

  function recTimeX(t) {
    const d = rec.data;
    return ((t - d.start) / (d.end - d.start)) * rec.plotW;
  }

  function drawRecent() {
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

  function updateRecNote() {
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
  async function loadRecent() {
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
    const want = valueWanted || (state.profile && state.profile.sample_types[state.valueIndex] || {}).type || "cpu";
    try {
      const a = await fetchRange(rec.a, controller.signal);
      const b = rec.b ? await fetchRange(rec.b, controller.signal) : null;
      if (seq !== rec.seq) return;
      valueWanted = null;
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

  // ---- the view and the page's address --------------------------------------

  let view = "profile";
  let applyingHash = false;
  let valueWanted = null; // a sample type named by the address, until a profile has it

  function showView() {
    for (const b of el.views.querySelectorAll("button"))
      b.setAttribute("aria-pressed", String(b.dataset.view === view));
    el.form.hidden = view !== "profile";
    el.recent.hidden = view !== "recent";
    document.body.dataset.view = view;
  }

  function setView(v, fromHash) {
    view = v === "recent" ? "recent" : "profile";
    showView();
    // Each view draws its own profiles.
    if (state.controller) state.controller.abort();
    if (rec.controller) rec.controller.abort();
    rec.seq++;
    rec.loadSeq++;
    state.diff = null;
    el.result.hidden = true;
    el.error.hidden = true;
    el.progress.textContent = "";
    setStatus("idle");
    if (!fromHash) writeHash();
    if (view === "recent") loadRecent();
  }

  const num = (x) => (x === null || x === "" ? NaN : Number(x));
  function parseRange(text) {
    if (!text) return null;
    const [a, b] = text.split(/[,~]/).map(num);
    return Number.isFinite(a) && Number.isFinite(b) && b > a ? [a, b] : null;
  }

  function writeHash() {
    if (applyingHash) return;
    const q = new URLSearchParams();
    q.set("view", view);
    q.set("kind", view === "recent" ? rec.kind : kind());
    if (view === "recent") {
      if (rec.source !== "live") q.set("recording", rec.source);
      else q.set("span", String(rec.span));
      if (rec.a) q.set("a", secText(rec.a[0]) + "," + secText(rec.a[1]));
      if (rec.b) q.set("b", secText(rec.b[0]) + "," + secText(rec.b[1]));
    } else {
      if (state.source && state.source.kind && state.source.id && el.result.hidden === false)
        q.set("id", state.source.id);
    }
    if (state.profile && !el.result.hidden) {
      const t = state.profile.sample_types[state.valueIndex];
      if (t) q.set("value", t.type);
    }
    if (el.search.value) q.set("search", el.search.value);
    const hash = "#" + q.toString();
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }

  /* The page's state from its address (#view=recent&a=T,T&b=T,T&search=...
   * or #view=profile&kind=heap&id=N): what a copied address opens. */
  function applyHash() {
    const q = new URLSearchParams(location.hash.slice(1));
    applyingHash = true;
    try {
      el.search.value = q.get("search") || "";
      valueWanted = q.get("value");
      const k = q.get("kind");
      if (q.get("view") === "recent") {
        rec.kind = [...el.recKind.options].some((o) => o.value === k) ? k : "profile";
        el.recKind.value = rec.kind;
      } else {
        const input = k && el.form.querySelector(`input[name=kind][value="${CSS.escape(k)}"]`);
        if (input) {
          input.checked = true;
          syncForm();
        }
      }
      rec.source = q.get("recording") || "live";
      const span = num(q.get("span"));
      if (Number.isFinite(span) && span >= 0) {
        rec.span = span;
        if (![...el.recSpan.options].some((o) => Number(o.value) === span)) {
          const o = document.createElement("option");
          o.value = String(span);
          o.textContent = `the last ${span} s`;
          el.recSpan.append(o);
        }
        el.recSpan.value = String(span);
      }
      rec.a = parseRange(q.get("a"));
      rec.b = rec.a ? parseRange(q.get("b")) : null;
      rec.brush = rec.a ? "b" : "a";
      setView(q.get("view") || "profile", true);
      const id = q.get("id");
      if (view === "profile" && id && /^\d+$/.test(id)) fetchProfile(id);
    } finally {
      applyingHash = false;
    }
  }

  // ---- wiring -------------------------------------------------------------------

  el.form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    fetchProfile();
  });
  el.form.addEventListener("change", (ev) => {
    if (ev.target.name === "kind") {
      syncForm();
      writeHash();
    }
  });
  el.cancel.addEventListener("click", () => state.controller && state.controller.abort());
  el.file.addEventListener("change", openFile);
  el.valueType.addEventListener("change", () => useValue(Number(el.valueType.value)));
  el.search.addEventListener("input", () => setSearch(el.search.value));
  el.back.addEventListener("click", back);
  el.reset.addEventListener("click", resetZoom);
  tableHead(el.top, [["Flat", "flat"], ["Flat %"], ["Cum", "cum"], ["Cum %"]]);
  tableHead(el.deltaTable, [["Δ per s"], ["A per s"], ["B per s"], ["Δ %"]]);
  for (const b of el.top.querySelectorAll("th button"))
    b.addEventListener("click", () => { state.sort = b.dataset.sort; fillTable(); });
  for (const table of [el.top, el.deltaTable]) {
    table.addEventListener("click", (ev) => {
      const tr = ev.target.closest("tbody tr");
      if (tr) pick(tr.dataset.name);
    });
    table.addEventListener("keydown", (ev) => {
      const tr = ev.target.closest("tbody tr");
      if (tr && (ev.key === "Enter" || ev.key === " ")) {
        ev.preventDefault();
        pick(tr.dataset.name);
      }
    });
  }

  function pick(name) {
    el.search.value = "^" + name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$";
    setSearch(el.search.value);
    el.wrap.scrollIntoView({ block: "nearest" });
  }

  el.canvas.addEventListener("mousemove", (ev) => {
    const n = state.model && hitTest(ev);
    if (n) showTip(n, ev);
    else el.tip.hidden = true;
  });
  el.canvas.addEventListener("mouseleave", () => { el.tip.hidden = true; });
  el.canvas.addEventListener("click", (ev) => {
    const n = state.model && hitTest(ev);
    if (n) zoom(n, true);
  });
  /* The keyboard: arrows move a selection between drawn frames (up to the
   * caller, down to the heaviest callee, left and right among siblings),
   * Enter zooms into it, Backspace goes back, Escape resets. */
  function rowNodes(n) {
    const row = state.rows.find((list) => list.some((b) => b.node === n));
    return row ? row.map((b) => b.node) : [n];
  }

  function select(n) {
    if (!n || !boxOf(n)) return;
    state.selected = n;
    render();
    const b = boxOf(n);
    const r = el.canvas.getBoundingClientRect();
    showTip(n, { clientX: r.left + b.x + Math.min(b.w / 2, 60), clientY: r.top + b.y + ROW / 2 });
    el.announce.textContent = el.tip.innerText;
  }

  el.canvas.addEventListener("keydown", (ev) => {
    if (!state.model) return;
    const cur = state.selected && boxOf(state.selected) ? state.selected : null;
    switch (ev.key) {
      case "Escape":
        state.selected = null;
        el.tip.hidden = true;
        resetZoom();
        render();
        break;
      case "Backspace":
        back();
        break;
      case "Enter":
      case " ":
        if (cur) zoom(cur, true);
        break;
      case "ArrowUp":
        select(cur ? cur.parent || cur : state.focus);
        break;
      case "ArrowDown": {
        if (!cur) {
          select(state.focus);
          break;
        }
        let best = null;
        for (const c of cur.children) if (boxOf(c) && (!best || c.value > best.value)) best = c;
        select(best || cur);
        break;
      }
      case "ArrowLeft":
      case "ArrowRight": {
        if (!cur) {
          select(state.focus);
          break;
        }
        const sib = rowNodes(cur);
        const i = sib.indexOf(cur) + (ev.key === "ArrowLeft" ? -1 : 1);
        select(sib[Math.max(0, Math.min(sib.length - 1, i))]);
        break;
      }
      default:
        return;
    }
    ev.preventDefault();
  });
  el.canvas.addEventListener("blur", () => { el.tip.hidden = true; });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "/" && document.activeElement !== el.search && !/INPUT|SELECT|TEXTAREA/.test(document.activeElement.tagName)) {
      ev.preventDefault();
      el.search.focus();
    }
  });
  /* The agent's limits and defaults, from its status: the longest window
   * it allows, its sampling rate, whether heap profiling is on. Without
   * them the form keeps its own. */
  function readAgentSettings() {
    fetch("../status", { cache: "no-store" })
      .then((r) => (r.ok ? r.json() : null))
      .then((st) => {
        if (!st || !st.config) return;
        const max = Number(st.config.max_seconds);
        if (max > 0) {
          el.seconds.max = String(max);
          if (Number(el.seconds.value) > max) el.seconds.value = String(max);
        }
        if (st.config.cpu_hz) el.hz.value = String(st.config.cpu_hz);
        if (st.heap && st.heap.enabled === false)
          for (const input of el.form.querySelectorAll("input[value=heap], input[value=allocs]"))
            input.parentElement.title = "heap profiling is off in this process (PULLPROF_HEAP_RATE=0)";
      })
      .catch(() => { /* an old or unreachable agent: keep the defaults */ });
  }

  const timelineChart = {
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
  wireChart(timelineChart);
  el.wholeWindow.addEventListener("click", () => setRange(null));
  el.colorBy.addEventListener("change", (ev) => setColorBy(ev.target.value));

  new ResizeObserver(scheduleRender).observe(el.wrap);
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", scheduleRender);
  for (const b of el.views.querySelectorAll("button"))
    b.addEventListener("click", () => { if (b.dataset.view !== view) setView(b.dataset.view); });
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
  /* Each kind's value shown first: CPU time, the heap in use (its change),
   * allocated bytes, the time waited. */
  const RANGE_VALUE = { profile: "cpu", heap: "inuse_space", allocs: "alloc_space", mutex: "delay", block: "delay" };
  el.recKind.addEventListener("change", () => {
    rec.kind = el.recKind.value;
    valueWanted = RANGE_VALUE[rec.kind] || null;
    updateRecNote();
    writeHash();
    loadRanges();
  });
  el.recBrush.addEventListener("change", (ev) => { rec.brush = ev.target.value; });
  el.recClear.addEventListener("click", () => clearRecRanges(false));
  el.recClearB.addEventListener("click", () => clearRecRanges(true));
  const recentChart = {
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
  wireChart(recentChart);
  window.addEventListener("hashchange", applyHash);

  syncForm();
  readAgentSettings();
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
    get view() { return view; },
    /* Draw a timeline given as /record/timeline's JSON in the Recent view
     * (tests: a shape no host at hand makes). */
    showRecent(j) {
      view = "recent";
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
})();
