/* The two views (a profile, Recent) and the page's address, which keeps
 * what the page shows so that a copied address opens it again. */

import { el, page, rec, state } from "./state.js";
import { secText } from "./format.js";
import { setStatus } from "./profile.js";
import { fetchProfile, kind, syncForm } from "./form.js";
import { loadRecent } from "./recent.js";

export function showView() {
  for (const b of el.views.querySelectorAll("button"))
    b.setAttribute("aria-pressed", String(b.dataset.view === page.view));
  el.form.hidden = page.view !== "profile";
  el.recent.hidden = page.view !== "recent";
  document.body.dataset.view = page.view;
}

function setView(v, fromHash) {
  page.view = v === "recent" ? "recent" : "profile";
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
  if (page.view === "recent") loadRecent();
}

const num = (x) => (x === null || x === "" ? NaN : Number(x));
function parseRange(text) {
  if (!text) return null;
  const [a, b] = text.split(/[,~]/).map(num);
  return Number.isFinite(a) && Number.isFinite(b) && b > a ? [a, b] : null;
}

export function writeHash() {
  if (page.applyingHash) return;
  const q = new URLSearchParams();
  q.set("view", page.view);
  q.set("kind", page.view === "recent" ? rec.kind : kind());
  if (page.view === "recent") {
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

export function applyHash() {
  const q = new URLSearchParams(location.hash.slice(1));
  page.applyingHash = true;
  try {
    el.search.value = q.get("search") || "";
    page.valueWanted = q.get("value");
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
    if (page.view === "profile" && id && /^\d+$/.test(id)) fetchProfile(id);
  } finally {
    page.applyingHash = false;
  }
}

/* The views' buttons, and the address changed by hand. */
export function wireAddress() {
  for (const b of el.views.querySelectorAll("button"))
    b.addEventListener("click", () => { if (b.dataset.view !== page.view) setView(b.dataset.view); });
  window.addEventListener("hashchange", applyHash);
}
