/* Colours (a function's, a thread state's, a difference's) and the canvas
 * helpers every drawing shares. */

function hash(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

export const SYNTHETIC_COLOR = "hsl(0, 0%, 68%)";
const UNKNOWN_COLOR = "hsl(210, 20%, 70%)";
const colorCache = new Map();
/* A function's colour: warm, from a hash of its name, so it is the same
 * in every drawing (flame graph and timeline) and every profile. */
export function nameColor(name, unknown) {
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
export function stateColor(st) {
  return STATE_COLORS[st] || `hsl(${120 + (hash(st) % 60)}, 40%, 58%)`;
}

/* A frame's colour in a difference: red where B is hotter than A, blue
 * where it is cooler, the deeper the larger the change against the
 * frame's own size; grey-white when about equal. */
export function diffColor(n) {
  const sum = n.a + n.b;
  const d = sum > 0 ? (n.b - n.a) / sum : 0; // -1 (only in A) .. 1 (only in B)
  const dark = window.matchMedia("(prefers-color-scheme: dark)").matches;
  const k = Math.min(1, Math.abs(d));
  if (k < 0.02) return dark ? "hsl(0, 0%, 78%)" : "hsl(0, 0%, 90%)";
  const light = (dark ? 80 : 92) - k * (dark ? 28 : 40);
  return d > 0 ? `hsl(2, 80%, ${light}%)` : `hsl(215, 80%, ${light}%)`;
}

export function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/* fn, run at the next frame once however often it is asked for until then. */
export function perFrame(fn) {
  let pending = 0;
  return () => {
    if (!pending) pending = requestAnimationFrame(() => { pending = 0; fn(); });
  };
}

/* cv sized to width × height CSS pixels at the screen's density, and its
 * context: cleared, drawing in CSS pixels. */
export function sizedContext(cv, width, height) {
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
