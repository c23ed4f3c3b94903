/* What the two charts (the timeline and the Recent chart) share: their
 * rows of names and bands, their time axis, brushing a range across them,
 * their tooltip. */

import { cssVar, sizedContext } from "./draw.js";

export const GUTTER = 190; // the lanes' names, left of the plot
const PLOT_END = 10; // margin right of the plot
export const AXIS_H = 20;

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
export function chartWidths(wrap) {
  const width = Math.max(GUTTER + 100, wrap.clientWidth);
  return [width, Math.max(1, Math.floor(width - GUTTER - PLOT_END))];
}

/* A chart's canvas, sized, with the context its rows are drawn in. */
export function chartContext(cv, width, height) {
  const ctx = sizedContext(cv, width, height);
  ctx.font = "12px system-ui, sans-serif";
  ctx.textBaseline = "middle";
  return ctx;
}

/* A chart's row from y, h high: its band across the plot, its name in
 * ink left of it. */
export function chartRow(ctx, y, h, plotW, label, ink, panel) {
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
export function drawAxis(cv, width, plotW, ax) {
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
export function placeTip(tip, wrap, ev) {
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
export function wireChart(c) {
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
export function chartRowY(c, top, h) {
  const sc = c.scroll;
  if (top < sc.scrollTop || top + h > sc.scrollTop + sc.clientHeight)
    sc.scrollTop = Math.max(0, top - sc.clientHeight / 2);
  c.wrap.scrollIntoView({ block: "nearest" });
  return c.plot.getBoundingClientRect().top + top + h / 2;
}
