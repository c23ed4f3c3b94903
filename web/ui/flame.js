/* The flame graph: drawing it on its canvas, its tooltip, zooming, the
 * search, and the keyboard. */

import { el, page, state, unitOf } from "./state.js";
import { formatValue, pctFmt, percent } from "./format.js";
import { SYNTHETIC_COLOR, cssVar, diffColor, nameColor, perFrame, sizedContext, stateColor } from "./draw.js";
import { placeTip } from "./chart.js";
import { writeHash } from "./address.js";

export const ROW = 18; // CSS pixels per frame row
const MIN_WIDTH = 0.35; // narrower frames (and their callees) are not drawn
const LABEL_MIN = 28; // frames narrower than this get no label

function frameColor(n) {
  if (state.diff) return diffColor(n);
  if (n.synthetic) return SYNTHETIC_COLOR;
  if (n.state) return stateColor(n.state);
  return nameColor(n.name, n.unknown);
}

const scheduleRender = perFrame(() => render());

export function render() {
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

export function updateZoomControls() {
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

export function setSearch(text) {
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
  if (!page.applyingHash) writeHash();
  render();
  state.timings.searchMs = performance.now() - t0; // matching and drawing
}

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

/* The flame graph's events: search, Back, Reset, the mouse, the keyboard
 * and its "/", a new width or colour scheme. */
export function wireFlame() {
  el.search.addEventListener("input", () => setSearch(el.search.value));
  el.back.addEventListener("click", back);
  el.reset.addEventListener("click", resetZoom);

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
  new ResizeObserver(scheduleRender).observe(el.wrap);
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", scheduleRender);
}
