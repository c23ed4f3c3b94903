/* Numbers, values in their units, and times, as the viewer writes them. */

export const intFmt = new Intl.NumberFormat("en-US");
export const pctFmt = new Intl.NumberFormat("en-US", { style: "percent", maximumFractionDigits: 2 });

function scaled(v, steps) {
  let i = 0;
  let x = Math.abs(v);
  while (i + 1 < steps.length && x >= steps[i + 1][0]) i++;
  const n = v / steps[i][0];
  const digits = i === 0 ? 0 : Math.abs(n) < 10 ? 2 : Math.abs(n) < 100 ? 1 : 0;
  return n.toFixed(digits) + " " + steps[i][1];
}

export function formatValue(v, unit) {
  switch (unit) {
    case "nanoseconds":
      return scaled(v, [[1, "ns"], [1e3, "µs"], [1e6, "ms"], [1e9, "s"]]);
    case "bytes":
      return scaled(v, [[1, "B"], [1024, "KiB"], [1048576, "MiB"], [1073741824, "GiB"]]);
    default:
      return intFmt.format(v) + (unit && unit !== "count" ? " " + unit : "");
  }
}

export function percent(v, of) {
  return of ? pctFmt.format(v / of) : "–";
}

export const secs = (ns) => (ns / 1e9).toFixed(2) + " s";

export const clock = (t) => {
  const d = new Date(t * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
};
export const clockTenths = (t) => clock(t) + "." + Math.floor(((t % 1) + 1) % 1 * 10);
export function rangeText(r) {
  return `${clockTenths(r[0])}–${clockTenths(r[1])} (${(r[1] - r[0]).toFixed(1)} s)`;
}
export const secText = (t) => t.toFixed(3);
