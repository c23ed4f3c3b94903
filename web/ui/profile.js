/* A profile shown: the tree of the value chosen (of a time range, or of
 * a difference), its summary, downloads, the list of values; the page's
 * status and errors. */

import { el, state, unitOf } from "./state.js";
import { formatValue, intFmt, rangeText, secs } from "./format.js";
import { build, check } from "./model.js";
import { setSearch, updateZoomControls } from "./flame.js";
import { prepareTimeline, rangeWeights, showTimeline, updateRangeNote } from "./timeline.js";
import { fillTable } from "./tables.js";

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

export function useValue(i) {
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
export function load(p, source, wantType, diff) {
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

export function setStatus(s) {
  state.status = s;
  document.body.dataset.state = s;
}

export function showError(title, detail) {
  el.error.replaceChildren();
  const t = document.createElement("strong");
  t.textContent = title;
  el.error.append(t);
  if (detail) el.error.append(detail.trim());
  el.error.hidden = false;
  el.progress.textContent = "";
  setStatus("error");
}
