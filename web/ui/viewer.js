/*
 * pullprof's flame graph viewer. Plain JavaScript, no build step, no other
 * origin: it fetches a profile as JSON from the agent that served this page
 * (?format=json on ../profile, ../heap, ../allocs, ../wall, ../goroutine),
 * merges the samples' stacks by function name into a tree and draws it on a
 * canvas, root at the top. Samples labelled with a thread state (wall-clock
 * profiles, thread dumps) hang under one "state: ..." frame per state, so
 * waiting and running time are told apart at a glance. A canvas keeps 50k-frame profiles smooth: only frames at least a
 * third of a pixel wide are drawn, and hit-testing uses the rectangles of
 * the last drawing.
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
    timings: { buildMs: 0, renderMs: 0, searchMs: 0 },
    controller: null,
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
      name, parent, value: 0, self: 0, x: 0,
      depth: parent ? parent.depth + 1 : 0, height: 0,
      file: frame ? frame.file : "", line: frame ? frame.line : 0,
      lineValues: null, unknown: frame ? frame.unknown : false,
      synthetic: name.startsWith("[pullprof:"), hit: false,
      state: frame ? frame.state || "" : "",
      kids: new Map(), children: null,
    };
  }

  function build(p, vi) {
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
          fn = { name: f.name, file: f.file, line: f.line, flat: 0, cum: 0, mark: -1 };
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
      const v = Number(s.values[vi]) || 0;
      if (v <= 0) {
        if (v < 0) skipped++;
        return;
      }
      const locs = s.locations || [];
      let node = root;
      root.value += v;
      const st = stateOf(s);
      if (st) {
        let sn = stateNodes.get(st);
        if (!sn) {
          sn = newNode("state: " + st, root, { file: "", line: 0, unknown: false, state: st });
          stateNodes.set(st, sn);
          root.kids.set(sn, sn);
        }
        sn.value += v;
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
          node = c;
          const fn = f.fn;
          if (fn.mark !== si) { // a recursive function counts once per sample
            fn.mark = si;
            fn.cum += v;
          }
        }
      }
      node.self += v;
      if (node !== root && !node.state) funcs.get(node.name).flat += v;
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

  const colorCache = new Map();
  function frameColor(n) {
    if (n.synthetic) return "hsl(0, 0%, 68%)";
    if (n.state) return n.state === "running" ? "hsl(4, 75%, 62%)" : "hsl(212, 60%, 68%)";
    if (n.unknown) return "hsl(210, 20%, 70%)";
    let c = colorCache.get(n.name);
    if (!c) {
      const h = hash(n.name);
      c = `hsl(${10 + (h % 40)}, ${70 + ((h >>> 8) % 20)}%, ${58 + ((h >>> 16) % 14)}%)`;
      colorCache.set(n.name, c);
    }
    return c;
  }

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  let pending = 0;
  function scheduleRender() {
    if (!pending) pending = requestAnimationFrame(() => { pending = 0; render(); });
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
    const dpr = window.devicePixelRatio || 1;
    const width = Math.max(200, el.wrap.clientWidth);
    const rowsN = ancestors.length + focus.height + 1;
    const height = Math.max(rowsN, 1) * ROW;
    cv.width = Math.round(width * dpr);
    cv.height = Math.round(height * dpr);
    cv.style.width = width + "px";
    cv.style.height = height + "px";
    const ctx = cv.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
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
    tip.hidden = false;
    const wr = el.wrap.getBoundingClientRect();
    let left = ev.clientX - wr.left + 14;
    const top = ev.clientY - wr.top + 16;
    if (left + tip.offsetWidth > wr.width) left = Math.max(0, ev.clientX - wr.left - tip.offsetWidth - 14);
    tip.style.left = left + "px";
    tip.style.top = top + "px";
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
    for (const tr of el.top.tBodies[0].rows)
      tr.classList.toggle("hit", !!state.search && state.search.test(tr.dataset.name));
    render();
    state.timings.searchMs = performance.now() - t0; // matching and drawing
  }

  function fillTable() {
    const m = state.model;
    const unit = unitOf();
    const key = state.sort;
    const list = m.funcs.filter((f) => f.flat || f.cum).sort((a, b) => b[key] - a[key] || b.cum - a.cum || (a.name < b.name ? -1 : 1));
    const body = document.createElement("tbody");
    for (const f of list.slice(0, TOP_ROWS)) {
      const tr = document.createElement("tr");
      tr.tabIndex = 0;
      tr.dataset.name = f.name;
      tr.title = "Highlight " + f.name + " in the flame graph";
      const cells = [
        formatValue(f.flat, unit), percent(f.flat, m.total),
        formatValue(f.cum, unit), percent(f.cum, m.total),
        f.name, f.file ? f.file + (f.line ? ":" + f.line : "") : "",
      ];
      for (const c of cells) {
        const td = document.createElement("td");
        td.textContent = c;
        tr.append(td);
      }
      if (state.search && state.search.test(f.name)) tr.classList.add("hit");
      body.append(tr);
    }
    el.top.tBodies[0].replaceWith(body);
    el.topCaption.textContent = `${list.length > TOP_ROWS ? "The top " + TOP_ROWS + " of " : ""}${intFmt.format(list.length)} functions by ${key === "flat" ? "flat (own)" : "cumulative"} value. Select a row to highlight the function.`;
    for (const b of el.top.querySelectorAll("th button"))
      b.setAttribute("aria-pressed", String(b.dataset.sort === key));
  }

  function describe() {
    const p = state.profile;
    const m = state.model;
    const unit = unitOf();
    const parts = [];
    const t = p.sample_types[state.valueIndex];
    parts.push(`${t.type} (${t.unit}) total ${formatValue(m.total, unit)}`);
    const counted = p.sample_types.findIndex((st) => st.type === "samples" && st.unit === "count");
    if (counted >= 0 && Array.isArray(p.totals) && p.totals[counted] != null)
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

  function useValue(i) {
    const t0 = performance.now();
    state.valueIndex = i;
    state.model = build(state.profile, i);
    state.timings.buildMs = performance.now() - t0;
    state.focus = state.model.root;
    state.history = [];
    state.selected = null;
    el.result.hidden = false;
    describe();
    fillTable();
    updateZoomControls();
    setSearch(el.search.value); // renders
  }

  /* Show a profile (the parsed JSON). wantType: a sample type's name to
   * show first, when the profile has it. */
  function load(p, source, wantType) {
    check(p);
    state.profile = p;
    state.source = source || {};
    let vi = p.sample_types.findIndex((t) => t.type === wantType);
    if (vi < 0) vi = Number.isInteger(p.default_sample_type) && p.sample_types[p.default_sample_type] ? p.default_sample_type : p.sample_types.length - 1;
    fillValueTypes();
    el.valueType.value = String(vi);
    useValue(vi);
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
  const timed = (k) => k === "profile" || k === "wall";
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

  async function fetchProfile() {
    const k = kind();
    const q = new URLSearchParams();
    let seconds = 0;
    if (timed(k)) {
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
      const what = k === "wall" ? "every thread" : "the CPU";
      el.progress.textContent = left > 0 ? `Sampling ${what}: ${left} s left…` : "Waiting for the agent…";
    };
    tick();
    const timer = seconds ? setInterval(tick, 1000) : 0;
    try {
      const resp = await fetch(url, { signal: controller.signal, cache: "no-store" });
      const type = resp.headers.get("Content-Type") || "";
      if (!resp.ok) {
        let body = await resp.text();
        if (type.startsWith("application/json")) {
          try { body = JSON.parse(body).error || body; } catch (e) { /* keep the text */ }
        }
        const retry = resp.headers.get("Retry-After");
        if (retry && !/retry/i.test(body)) body = body.trim() + `\n(The agent asks to retry in ${retry} s.)`;
        showError(`The agent answered ${resp.status} ${resp.statusText}`, body);
        return;
      }
      if (!type.startsWith("application/json")) {
        showError("The agent did not answer JSON", `${url} answered ${type || "no Content-Type"}; this agent may not support format=json.`);
        return;
      }
      const id = resp.headers.get("X-Pullprof-Profile-Id");
      const p = await resp.json();
      el.progress.textContent = "Building the flame graph…";
      load(p, { kind: k, id }, heapKind(k) ? el.heapIndex.value : null);
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

  // ---- wiring -------------------------------------------------------------------

  el.form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    fetchProfile();
  });
  el.form.addEventListener("change", (ev) => {
    if (ev.target.name === "kind") syncForm();
  });
  el.cancel.addEventListener("click", () => state.controller && state.controller.abort());
  el.file.addEventListener("change", openFile);
  el.valueType.addEventListener("change", () => useValue(Number(el.valueType.value)));
  el.search.addEventListener("input", () => setSearch(el.search.value));
  el.back.addEventListener("click", back);
  el.reset.addEventListener("click", resetZoom);
  for (const b of el.top.querySelectorAll("th button"))
    b.addEventListener("click", () => { state.sort = b.dataset.sort; fillTable(); });
  el.top.addEventListener("click", (ev) => {
    const tr = ev.target.closest("tbody tr");
    if (tr) pick(tr.dataset.name);
  });
  el.top.addEventListener("keydown", (ev) => {
    const tr = ev.target.closest("tbody tr");
    if (tr && (ev.key === "Enter" || ev.key === " ")) {
      ev.preventDefault();
      pick(tr.dataset.name);
    }
  });

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

  new ResizeObserver(scheduleRender).observe(el.wrap);
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", scheduleRender);
  syncForm();
  readAgentSettings();

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
    render() { render(); return state.timings.renderMs; },
    /* Build the tree again from the loaded profile: {buildMs, renderMs}. */
    rebuild() { useValue(state.valueIndex); render(); return Object.assign({}, state.timings); },
  };
})();
