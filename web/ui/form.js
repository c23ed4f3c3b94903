/* The form: the kinds of profile offered (the agent's, from its status),
 * their options, fetching a profile, opening a JSON file. */

import { el, page, state } from "./state.js";
import { load, setStatus, showError, useValue } from "./profile.js";
import { answerText } from "./agent.js";
import { writeHash } from "./address.js";

export function kind() {
  return el.form.elements.kind.value;
}

/* Kinds sampled over a window (seconds, hz), and the heap's. */

const timed = (k) => k === "profile" || k === "wall" || k === "fgprof";
const heapKind = (k) => k === "heap" || k === "allocs";

export function syncForm() {
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

/* Fetch a profile of the kind chosen, or (id) one the agent kept: the
 * address of a page that showed it. */
export async function fetchProfile(id) {
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
    const want = page.valueWanted || (heapKind(k) ? el.heapIndex.value : null);
    page.valueWanted = null;
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

/* The kinds of profile the form may offer, in its order, with their
 * labels. A kind the agent lists that is not here is offered too, after
 * these, by its name. */
const KIND_LABELS = [
  ["profile", "CPU"],
  ["heap", "Heap (in use)"],
  ["allocs", "Allocations"],
  ["wall", "Wall clock"],
  ["fgprof", "Wall clock (fgprof)"],
  ["goroutine", "Threads now"],
  ["threadcreate", "Thread creation"],
  ["mutex", "Lock contention (mutex)"],
  ["block", "Blocking (block)"],
];

/* The fallback, for an agent whose status fails (or an older one's,
 * without "kinds"): every kind above. The form offers it until the status
 * answers too, so that the page works at once (a copied address picks its
 * kind); the agent's list replaces it when it comes. */
const FALLBACK_KINDS = KIND_LABELS.map(([k]) => k);

/* Where the kinds offered come from: "fallback" or "status". */
export let kindsFrom = "fallback";

/* Offer the kinds named (the profiles' paths below the prefix, as
 * /status's kinds[].profiles name them) as the form's radio buttons, the
 * one chosen kept when it is still offered. Nothing changes when they are
 * the kinds offered already. */
function offerKinds(names) {
  const rank = (k) => {
    const i = KIND_LABELS.findIndex(([n]) => n === k);
    return i < 0 ? KIND_LABELS.length : i;
  };
  const list = Array.from(new Set(names)).sort((a, b) => rank(a) - rank(b));
  const inputs = Array.from(el.kinds.querySelectorAll("input[name=kind]"));
  if (!list.length || list.join(" ") === inputs.map((i) => i.value).join(" ")) return;
  const was = inputs.length ? kind() : "";
  for (const label of el.kinds.querySelectorAll("label")) label.remove();
  for (const k of list) {
    const label = document.createElement("label");
    const input = document.createElement("input");
    input.type = "radio";
    input.name = "kind";
    input.value = k;
    const known = KIND_LABELS.find(([n]) => n === k);
    label.append(input, " " + (known ? known[1] : k));
    el.kinds.append(label);
  }
  const keep = el.kinds.querySelector(`input[value="${CSS.escape(was)}"]`);
  (keep || el.kinds.querySelector("input")).checked = true;
  syncForm();
  if (was && !keep) writeHash();
}

export function offerFallbackKinds() {
  offerKinds(FALLBACK_KINDS);
}

/* What the form takes from the agent's status (null when it failed): the
 * kinds it serves, the longest window it allows, its sampling rate,
 * whether heap profiling is on. Without them the form keeps its own. */
export function useAgentStatus(st) {
  if (!st) return;
  const names = Array.isArray(st.kinds)
    ? st.kinds.flatMap((k) => (Array.isArray(k.profiles) ? k.profiles.map(String) : []))
    : [];
  if (names.length) {
    offerKinds(names);
    kindsFrom = "status";
  }
  if (!st.config) return;
  const max = Number(st.config.max_seconds);
  if (max > 0) {
    el.seconds.max = String(max);
    if (Number(el.seconds.value) > max) el.seconds.value = String(max);
  }
  if (st.config.cpu_hz) el.hz.value = String(st.config.cpu_hz);
  if (st.heap && st.heap.enabled === false)
    for (const input of el.form.querySelectorAll("input[value=heap], input[value=allocs]"))
      input.parentElement.title = "heap profiling is off in this process (PULLPROF_HEAP_RATE=0)";
}

/* The form's events: fetch, the kind chosen, cancel, a file, the value shown. */
export function wireForm() {
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
}
