/* The function tables under the flame graph: the top functions, and a
 * difference's changes. */

import { el, state, unitOf } from "./state.js";
import { formatValue, intFmt, pctFmt, percent } from "./format.js";
import { setSearch } from "./flame.js";

const TOP_ROWS = 200; // rows in the top-functions table

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

export function fillTable() {
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

function pick(name) {
  el.search.value = "^" + name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$";
  setSearch(el.search.value);
  el.wrap.scrollIntoView({ block: "nearest" });
}

/* The tables' heads, sorting, and a row chosen by click or key. */
export function wireTables() {
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
}
