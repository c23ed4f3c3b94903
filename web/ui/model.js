/* A profile (pullprof's JSON) as a tree: its stacks merged by function
 * name, root first, with each function's flat and cumulative value; two
 * profiles merged into one for a difference. No drawing here. */

export function check(p) {
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
export function locationFrames(p) {
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
export function build(p, vi, weights, sides) {
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

/* Two profiles as one, for a difference: their tables end to end, B's
 * indices moved past A's; sides[i] says which one sample i comes from. */
export function mergeProfiles(pa, pb) {
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
