/**
 * Self-contained HTML: inline CSS and SVG charts, no script, no network
 * request. Every chart has a text title, an accessible description and a
 * table of its numbers beside it, for screen readers and copy-paste.
 *
 * Layout: a page is the verdict, a header (what was measured: model,
 * calibration, files) and one band per question. A band's cards (numbers
 * first, then charts) flow down columns as wide as a chart, as many as the
 * window holds, each card as tall as what it holds: no card has a blank
 * half, and no column waits on a taller neighbour. Every chart is drawn at one scale
 * (CHART_SCALE pixels per unit, so 11-unit text is 12.3 px) whatever its
 * card: type is the same size on the whole page, and a chart shrinks only
 * when the window is narrower than it. No label is ever cut: category names
 * wrap onto more lines, or stand vertical under narrow columns, and room is
 * kept for the longest value beside a bar.
 */
import { relative, isAbsolute } from "node:path";
import { num, pct, plural, tally } from "./numbers.js";

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);
}

/**
 * A range `lo – hi` with just enough significant digits that the two bounds
 * read differently (one value when they are equal), so a narrow band never
 * prints "0.0000026 – 0.0000026".
 */
export function rangeText(lo: number, hi: number, separator = " – "): string {
  const fmt = (x: number, p: number) => (x === 0 ? "0" : trimZeros(x.toPrecision(p)));
  if (lo === hi) return fmt(lo, 3);
  for (let p = 2; p <= 15; p++) {
    const a = fmt(lo, p);
    const b = fmt(hi, p);
    if (a !== b) return `${a}${separator}${b}`;
  }
  return fmt(lo, 15);
}

function trimZeros(s: string): string {
  return s.includes(".") && !s.includes("e") ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
}

/**
 * A file as the user named it: a path under the current directory is shown
 * relative to it, any other as given. Reports never need the temporary
 * absolute path a file happened to be resolved to.
 */
export function displayPath(path: string, cwd = process.cwd()): string {
  if (!isAbsolute(path)) return path;
  const r = relative(cwd, path);
  return r !== "" && !r.startsWith("..") && !isAbsolute(r) ? r : path;
}

/** Round ticks from 0 (or `lo`) covering `max`: steps of 1, 2 or 5 times a power of ten, about `count` of them. */
export function niceTicks(max: number, count = 4, lo = 0): { ticks: number[]; top: number; step: number } {
  const span = Math.max(max - lo, 1e-12);
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw - 1e-12) ?? 10 * power) as number;
  const top = lo + Math.ceil(span / step - 1e-9) * step;
  const ticks: number[] = [];
  for (let v = lo; v <= top + step / 1e6; v += step) ticks.push(Number(v.toPrecision(12)));
  return { ticks, top, step };
}

/** A tick value with as many decimals as its step needs (0.25 → 2, 50 → 0). */
function tickText(v: number, step: number, percent = false): string {
  const x = percent ? v * 100 : v;
  const s = percent ? step * 100 : step;
  const decimals = Math.max(0, -Math.floor(Math.log10(s) + 1e-9) + (Number((s / 10 ** Math.floor(Math.log10(s) + 1e-9)).toFixed(6)) % 1 !== 0 ? 1 : 0));
  const text = x.toLocaleString("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
  return percent ? `${text}%` : text;
}

/** Width of a text at a font size, in SVG units (system-ui averages a little over half an em per character). */
const textWidth = (s: string, size: number) => s.length * size * 0.58;

/** Splits a label into lines of at most `max` characters at spaces (a longer word stays whole on its own line). */
export function wrapLabel(label: string, max: number): string[] {
  const words = label.split(/\s+/).filter((w) => w !== "");
  const lines: string[] = [];
  for (const w of words) {
    const last = lines[lines.length - 1];
    if (last !== undefined && last.length + 1 + w.length <= max) lines[lines.length - 1] = `${last} ${w}`;
    else lines.push(w);
  }
  return lines.length ? lines : [label];
}

/**
 * Lines of a label as tspans; each but the last ends in a space, so the
 * element's text is the full label. `dx`/`dy` step from one line to the next.
 */
function lines(parts: string[], x: number, step: { dx: number; dy: number }): string {
  return parts
    .map((p, i) => {
      const at = i === 0 ? `x="${x}"` : step.dx ? `dx="${step.dx}"` : `x="${x}" dy="${step.dy}"`;
      return `<tspan ${at}${i > 0 && step.dx ? ` dy="${-step.dy}"` : ""}>${escapeHtml(p)}${i < parts.length - 1 ? " " : ""}</tspan>`;
    })
    .join("");
}

let chartId = 0;

interface Table {
  head: string[];
  rows: (string | number)[][];
}

// A count in a chart's table reads as every count does: 4,559, never 4559.
const cells = (r: (string | number)[], tag: string) =>
  r.map((c) => `<${tag}>${escapeHtml(typeof c === "number" && Number.isInteger(c) ? tally(c) : String(c))}</${tag}>`).join("");

/** Pixels per chart unit, the same for every chart of every page. */
export const CHART_SCALE = 1.12;

/** A chart card: title, SVG at the page's one scale, the table of its numbers, and optional visible HTML under the chart. */
function figure(title: string, svg: string, size: { w: number; h: number }, table: Table, below = ""): string {
  const id = `c${++chartId}`;
  const w = Math.round(size.w * CHART_SCALE);
  return `<figure class="card chart" data-chart="${escapeHtml(title)}" data-w="${w}">
<figcaption id="${id}">${escapeHtml(title)}</figcaption>
<svg role="img" aria-labelledby="${id}" width="${w}" height="${Math.round(size.h * CHART_SCALE)}" viewBox="0 0 ${size.w} ${size.h}" preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">${svg}</svg>
${below}<details><summary>numbers</summary><table><thead><tr>${cells(table.head, "th")}</tr></thead><tbody>${table.rows.map((r) => `<tr>${cells(r, "td")}</tr>`).join("")}</tbody></table></details>
</figure>`;
}

/** Chart geometry in SVG units: every chart is 300 wide, so text renders at about its nominal size in a 300 px card. */
const W = 300;
const FONT = 11;

interface Frame {
  left: number;
  top: number;
  width: number;
  height: number;
}
const xIn = (f: Frame, v: number) => f.left + v * f.width;
const yIn = (f: Frame, v: number) => f.top + (1 - v) * f.height;

/** Axis lines, y ticks (fractions of the axis, with their texts) and rotated axis titles. */
function axes(f: Frame, yTicks: { at: number; text: string }[], yLabel: string): string {
  let s = `<g class="axis"><line x1="${f.left}" y1="${f.top + f.height}" x2="${f.left + f.width}" y2="${f.top + f.height}"/><line x1="${f.left}" y1="${f.top}" x2="${f.left}" y2="${f.top + f.height}"/>`;
  for (const t of yTicks) {
    const y = yIn(f, t.at);
    s += `<line class="grid" x1="${f.left}" y1="${y}" x2="${f.left + f.width}" y2="${y}"/><text x="${f.left - 4}" y="${y + 4}" text-anchor="end">${escapeHtml(t.text)}</text>`;
  }
  s += `<text transform="translate(11 ${f.top + f.height / 2}) rotate(-90)" text-anchor="middle">${escapeHtml(yLabel)}</text></g>`;
  return s;
}

function xTicks(f: Frame, ticks: { at: number; text: string }[], y: number): string {
  return ticks
    .map((t, i) => {
      const anchor = i === 0 && t.at === 0 ? "start" : i === ticks.length - 1 && t.at === 1 ? "end" : "middle";
      return `<text x="${xIn(f, t.at)}" y="${y}" text-anchor="${anchor}">${escapeHtml(t.text)}</text>`;
    })
    .join("");
}

/** Ticks over [lo, hi] as fractions of the axis. */
function scaleTicks(lo: number, hi: number, count: number, percent = false): { at: number; text: string }[] {
  const { ticks, step } = niceTicks(hi, count, lo);
  return ticks.filter((v) => v <= hi + 1e-9).map((v) => ({ at: (v - lo) / (hi - lo || 1), text: tickText(v, step, percent) }));
}

/**
 * Horizontal bars for labelled categories: one row per label, its full name
 * at the left (wrapped), one bar per series. Reads at any label length.
 */
export function barChart(
  title: string,
  labels: string[],
  series: Series[],
  options: { format?: "share" | "number"; xLabel?: string; fixedMax?: number } = {},
): string {
  const format = options.format ?? "share";
  const show = (v: number) => (format === "share" ? pct(v) : num(v));
  const maxChars = 18;
  const wrapped = labels.map((l) => wrapLabel(l, maxChars));
  const labelW = Math.min(Math.max(...wrapped.flat().map((l) => textWidth(l, FONT)), 20), 120);
  const legendH = series.length > 1 ? 18 : 4;
  // Room right of the axis for the widest value printed beside its bar (a 100% bar's "100.0%" included), and for the last tick.
  const valueRoom = Math.max(20, ...series.flatMap((x) => x.values.map((v) => textWidth(show(v), 10) + 8)));
  const f: Frame = { left: labelW + 10, top: legendH + 6, width: W - labelW - 10 - valueRoom, height: 0 };
  const barH = series.length > 1 ? 13 : 15;
  const rowH = labels.map((_, i) => Math.max(wrapped[i]!.length * 12 + 4, series.length * barH + 8));
  f.height = rowH.reduce((a, b) => a + b, 0);
  const dataMax = Math.max(1e-9, ...series.flatMap((s) => s.values.filter(Number.isFinite)));
  // About one tick per 50 units, so tick texts never run together on a narrow axis; the axis ends on its last tick.
  const count = Math.max(2, Math.min(4, Math.floor(f.width / 50)));
  const hi = options.fixedMax ?? niceTicks(dataMax, count).top;
  const ticks = scaleTicks(0, hi, count, format === "share");
  const h = f.top + f.height + 34;
  let svg = `<g class="axis"><line x1="${f.left}" y1="${f.top}" x2="${f.left}" y2="${f.top + f.height}"/><line x1="${f.left}" y1="${f.top + f.height}" x2="${f.left + f.width}" y2="${f.top + f.height}"/>`;
  for (const t of ticks) svg += `<line class="grid" x1="${xIn(f, t.at)}" y1="${f.top}" x2="${xIn(f, t.at)}" y2="${f.top + f.height}"/>`;
  svg += `${xTicks(f, ticks, f.top + f.height + 13)}<text x="${xIn(f, 0.5)}" y="${h - 5}" text-anchor="middle">${escapeHtml(options.xLabel ?? (format === "share" ? "share of rows" : "value"))}</text></g>`;
  let y = f.top;
  labels.forEach((label, i) => {
    const rh = rowH[i] as number;
    const block = series.length * barH;
    series.forEach((s, j) => {
      const v = s.values[i] ?? 0;
      const w = Number.isFinite(v) ? (Math.max(0, v) / hi) * f.width : 0;
      const by = y + (rh - block) / 2 + j * barH;
      svg += `<rect class="${toneOf(s, j, series)}" x="${f.left}" y="${by + 1}" width="${w}" height="${barH - 2}"><title>${escapeHtml(`${label}, ${s.name}: ${show(v)}`)}</title></rect>`;
      // The value just right of its bar: the numbers read without hovering.
      svg += `<text class="small" x="${f.left + w + 3}" y="${by + barH - 2.5}">${escapeHtml(show(v))}</text>`;
    });
    const parts = wrapped[i] as string[];
    const ty = y + rh / 2 - ((parts.length - 1) * 12) / 2 + 4;
    svg += `<text class="label" x="${f.left - 5}" y="${ty}" text-anchor="end">${lines(parts, f.left - 5, { dx: 0, dy: 12 })}</text>`;
    y += rh;
  });
  if (series.length > 1) svg += legend(series, f.left);
  return figure(
    title,
    svg,
    { w: W, h },
    {
      head: ["label", ...series.map((s) => s.name)],
      rows: labels.map((l, i) => [l, ...series.map((s) => show(s.values[i] as number))]),
    },
  );
}

/** A chart's series: its name and values; "earlier" draws it grey, as every comparison with an earlier run does. */
export interface Series {
  name: string;
  values: number[];
  tone?: "earlier";
}

/** A series' colour class: grey for the earlier run, else the next colour of the series that are not earlier ones (so "now" is always the first colour). */
const toneOf = (s: Series, j: number, all?: readonly Series[]) =>
  s.tone === "earlier" ? "earlier" : `s${all ? all.filter((x) => x.tone !== "earlier").indexOf(s) : j}`;

function legend(series: Series[], x: number): string {
  // Above the plot, so it never covers a bar.
  let at = x;
  return series
    .map((n, j) => {
      const s = `<rect class="${toneOf(n, j, series)}" x="${at}" y="4" width="10" height="10"/><text x="${at + 14}" y="13">${escapeHtml(n.name)}</text>`;
      at += 14 + textWidth(n.name, FONT) + 14;
      return s;
    })
    .join("");
}

/**
 * A histogram over [lo, hi] from bin counts, with round ticks on both axes.
 * Several series (an earlier run and this one) stand side by side in each
 * bin, as shares of their own rows, so runs of different sizes compare.
 */
export function histogram(title: string, series: Series[], lo: number, hi: number, xLabel: string): string {
  const shares = series.length > 1;
  const values = series.map((x) => {
    const total = x.values.reduce((a, b) => a + b, 0) || 1;
    return shares ? x.values.map((v) => v / total) : x.values;
  });
  const legendH = shares ? 18 : 0;
  const f: Frame = { left: 46, top: 10 + legendH, width: W - 46 - 12, height: 150 };
  const bins = series[0]?.values.length ?? 0;
  const { top } = niceTicks(Math.max(shares ? 0.01 : 1, ...values.flat()), 4);
  const w = f.width / (bins || 1);
  const barW = (w - 1) / series.length;
  let svg = axes(f, scaleTicks(0, top, 4, shares), shares ? "share of rows" : "rows");
  series.forEach((x, j) =>
    values[j]!.forEach((v, i) => {
      const h = (v / top) * f.height;
      const a = lo + ((hi - lo) * i) / bins;
      const b = lo + ((hi - lo) * (i + 1)) / bins;
      const text = shares ? `${x.name}: ${pct(v)} (${plural(x.values[i] ?? 0, "row")})` : tally(v);
      svg += `<rect class="${toneOf(x, j, series)}" x="${f.left + i * w + 0.5 + j * barW}" y="${f.top + f.height - h}" width="${Math.max(barW, 0.5)}" height="${h}"><title>${rangeText(a, b, "-")}: ${escapeHtml(text)}</title></rect>`;
    }),
  );
  svg += xTicks(f, scaleTicks(lo, hi, hi - lo > 1 && hi - lo <= 6 ? hi - lo : 4), f.top + f.height + 14);
  svg += `<text x="${xIn(f, 0.5)}" y="${f.top + f.height + 32}" text-anchor="middle">${escapeHtml(xLabel)}</text>`;
  if (shares) svg += legend(series, f.left);
  const edges = (i: number) => [num(lo + ((hi - lo) * i) / bins, 3), num(lo + ((hi - lo) * (i + 1)) / bins, 3)];
  return figure(
    title,
    svg,
    { w: W, h: f.top + f.height + 38 },
    {
      head: ["from", "to", ...series.map((x) => `${x.name}: rows`)],
      rows: Array.from({ length: bins }, (_, i) => [...edges(i), ...series.map((x) => x.values[i] ?? 0)]),
    },
  );
}

/** A round count in at most four characters, so it fits beside a narrow axis: 800, 2k, 1.5k, 20k, 3M. */
export function compactCount(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1e6) return `${Number((n / 1000).toPrecision(2))}k`;
  return `${Number((n / 1e6).toPrecision(2))}M`;
}

/**
 * Reliability diagram: accuracy per confidence bin against the diagonal; a
 * strip under it shows how many rows each bin holds, on its own round scale.
 */
export function reliabilityDiagram(title: string, bins: { lo: number; hi: number; count: number; confidence: number; accuracy: number }[]): string {
  const f: Frame = { left: 46, top: 10, width: W - 46 - 12, height: 140 };
  const strip: Frame = { left: f.left, top: f.top + f.height + 16, width: f.width, height: 36 };
  let svg = axes(f, scaleTicks(0, 1, 4), "accuracy");
  svg += `<line class="diag" x1="${xIn(f, 0)}" y1="${yIn(f, 0)}" x2="${xIn(f, 1)}" y2="${yIn(f, 1)}"/>`;
  const { top: countTop } = niceTicks(Math.max(1, ...bins.map((b) => b.count)), 1);
  for (const b of bins) {
    if (b.count === 0) continue;
    const x = xIn(f, b.lo);
    const w = xIn(f, b.hi) - x;
    svg += `<rect class="s0" x="${x + 0.5}" y="${yIn(f, b.accuracy)}" width="${w - 1}" height="${yIn(f, 0) - yIn(f, b.accuracy)}"><title>${rangeText(b.lo, b.hi, "-")}: accuracy ${num(b.accuracy)}, confidence ${num(b.confidence)}, ${plural(b.count, "row")}</title></rect>`;
    const ch = (b.count / countTop) * strip.height;
    svg += `<rect class="count" x="${x + 0.5}" y="${strip.top + strip.height - ch}" width="${w - 1}" height="${ch}"><title>${plural(b.count, "row")}</title></rect>`;
  }
  svg += `<g class="axis"><line x1="${strip.left}" y1="${strip.top + strip.height}" x2="${strip.left + strip.width}" y2="${strip.top + strip.height}"/><line x1="${strip.left}" y1="${strip.top}" x2="${strip.left}" y2="${strip.top + strip.height}"/>`;
  svg += `<text class="small" x="${strip.left - 4}" y="${strip.top + 8}" text-anchor="end">${compactCount(countTop)}</text><text class="small" x="${strip.left - 4}" y="${strip.top + strip.height}" text-anchor="end">0</text>`;
  svg += `<text class="small" transform="translate(11 ${strip.top + strip.height / 2}) rotate(-90)" text-anchor="middle">rows</text></g>`;
  svg += xTicks(f, scaleTicks(0, 1, 4), strip.top + strip.height + 14);
  svg += `<text x="${xIn(f, 0.5)}" y="${strip.top + strip.height + 32}" text-anchor="middle">confidence (top-label probability)</text>`;
  return figure(
    title,
    svg,
    { w: W, h: strip.top + strip.height + 38 },
    {
      head: ["bin", "rows", "mean confidence", "accuracy", "gap"],
      rows: bins
        .filter((b) => b.count > 0)
        .map((b) => [`${num(b.lo, 3)}-${num(b.hi, 3)}`, b.count, num(b.confidence), num(b.accuracy), num(b.accuracy - b.confidence)]),
    },
  );
}

/** Accuracy against coverage (rows taken most confident first), with the table of chosen points visible under it. */
export function coverageCurve(title: string, points: { coverage: number; accuracy: number; threshold: number }[], below?: Table): string {
  const minAcc = Math.min(1, ...points.map((p) => p.accuracy));
  // At least 0.8 to 1 (ticks of 0.05), so every tick prints in two decimals: 0.9 to 1 would print 0.975, wider than the axis title's room.
  const lo = Math.max(0, Math.min(0.8, Math.floor(minAcc * 10) / 10 - 0.1));
  const f: Frame = { left: 46, top: 10, width: W - 46 - 14, height: 150 };
  const y = (a: number) => yIn(f, (a - lo) / (1 - lo));
  let svg = axes(f, scaleTicks(lo, 1, 4), "accuracy");
  svg += xTicks(
    f,
    [0, 0.25, 0.5, 0.75, 1].map((v) => ({ at: v, text: `${v * 100}%` })),
    f.top + f.height + 14,
  );
  svg += `<text x="${xIn(f, 0.5)}" y="${f.top + f.height + 32}" text-anchor="middle">coverage (most confident rows first)</text>`;
  svg += `<polyline class="line" points="${points.map((p) => `${xIn(f, p.coverage).toFixed(1)},${y(p.accuracy).toFixed(1)}`).join(" ")}"/>`;
  const table = points.filter((p) => Math.round(p.coverage * 100) % 10 === 0 || p.coverage === 0.05);
  const visible = below
    ? `<table class="under">${`<thead><tr>${cells(below.head, "th")}</tr></thead>`}<tbody>${below.rows.map((r) => `<tr>${cells(r, "td")}</tr>`).join("")}</tbody></table>`
    : "";
  return figure(
    title,
    svg,
    { w: W, h: f.top + f.height + 38 },
    { head: ["coverage", "accuracy", "confidence threshold"], rows: table.map((p) => [pct(p.coverage), num(p.accuracy), num(p.threshold)]) },
    visible,
  );
}

/**
 * Confusion matrix as a heat map: rows gold, columns predicted, counts in the
 * cells. Row names stand at the left, wrapped; column names stand vertical
 * under their column, wrapped into more lines when long: every name whole.
 */
export function heatMap(title: string, labels: string[], matrix: number[][]): string {
  const k = labels.length;
  const max = Math.max(1, ...matrix.flat());
  const digits = tally(Math.round(max)).length;
  const rowLines = labels.map((l) => wrapLabel(l, 16));
  const colLines = labels.map((l) => wrapLabel(l, 18));
  const maxColLines = Math.max(...colLines.map((l) => l.length));
  const rowW = Math.max(...rowLines.flat().map((l) => textWidth(l, 10)));
  const colH = Math.max(...colLines.flat().map((l) => textWidth(l, 10)));
  const left = 22 + rowW + 6;
  // Cells fill the chart's width when few (up to 64 units), and grow past it when names or counts need room.
  const size = Math.max(
    Math.min(64, Math.floor((W - left - 6) / k)),
    30,
    digits * 7 + 8,
    maxColLines * 11 + 6,
    Math.max(...rowLines.map((l) => l.length)) * 12 + 4,
  );
  const top = 6;
  const gridBottom = top + k * size;
  const w = Math.max(W, left + k * size + 6);
  const h = gridBottom + 6 + colH + 22;
  let svg = "";
  matrix.forEach((row, r) =>
    row.forEach((v, c) => {
      const t = v / max;
      svg += `<rect x="${left + c * size}" y="${top + r * size}" width="${size - 1}" height="${size - 1}" fill="rgba(37, 99, 235, ${(0.08 + 0.92 * t).toFixed(3)})"><title>gold ${escapeHtml(labels[r] as string)}, predicted ${escapeHtml(labels[c] as string)}: ${tally(v)}</title></rect>`;
      svg += `<text class="${t > 0.55 ? "light" : ""}" x="${left + c * size + size / 2}" y="${top + r * size + size / 2 + 4}" text-anchor="middle">${tally(v)}</text>`;
    }),
  );
  labels.forEach((_, i) => {
    const rl = rowLines[i] as string[];
    const ry = top + i * size + size / 2 - ((rl.length - 1) * 12) / 2 + 3.5;
    svg += `<text class="label small" x="${left - 5}" y="${ry}" text-anchor="end">${lines(rl, left - 5, { dx: 0, dy: 12 })}</text>`;
    // Vertical, reading upwards from just under the grid; extra lines step right.
    const cl = colLines[i] as string[];
    const cx = left + i * size + size / 2 - ((cl.length - 1) * 11) / 2 + 3.5;
    svg += `<text class="label small" transform="translate(${cx} ${gridBottom + 5}) rotate(-90)" text-anchor="end">${cl
      .map((p, j) => `<tspan x="0" y="${j * 11}">${escapeHtml(p)}${j < cl.length - 1 ? " " : ""}</tspan>`)
      .join("")}</text>`;
  });
  svg += `<text x="${left + (k * size) / 2}" y="${h - 6}" text-anchor="middle">predicted</text><text transform="translate(11 ${top + (k * size) / 2}) rotate(-90)" text-anchor="middle">gold</text>`;
  return figure(title, svg, { w, h }, { head: ["gold \\ predicted", ...labels], rows: matrix.map((row, r) => [labels[r] as string, ...row]) });
}

const CSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:16px 24px;color:#1f2937;background:#fff}
h1{font-size:22px;margin:4px 0 8px;overflow-wrap:anywhere}h2{font-size:18px;margin:28px 0 10px;border-bottom:1px solid #e5e7eb;padding-bottom:4px;overflow-wrap:anywhere}
h3{font-size:14px;margin:10px 0 4px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #e5e7eb;padding:2px 7px;text-align:right;overflow-wrap:anywhere}th{background:#f9fafb;overflow-wrap:normal}td:first-child,th:first-child{text-align:left}
td .sub{font-size:12px;color:#4b5563;white-space:nowrap}
.prov{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:2px 14px;margin:14px 0 8px;padding:10px 14px;background:#f9fafb;border:1px solid #e5e7eb;border-radius:6px}
.prov dt{font-weight:600;color:#4b5563}.prov dd{margin:0;overflow-wrap:anywhere}
.band{columns:var(--card) auto;column-gap:12px}
.card{margin:0 0 12px;border:1px solid #e5e7eb;border-radius:6px;padding:8px 10px;min-width:0;box-sizing:border-box;overflow-wrap:break-word;break-inside:avoid;display:block}
.card>:first-child{margin-top:0}.card>:last-child{margin-bottom:0}
.numbers table,.classes table{width:100%}.wide{column-span:all}
.chart svg{display:block;max-width:100%;height:auto}
figcaption{font-weight:600;margin-bottom:4px}details{font-size:12px}
.tiles{display:flex;flex-wrap:wrap;gap:6px;margin-bottom:6px}.tile{flex:1 1 90px;border:1px solid #e5e7eb;border-radius:6px;padding:4px 8px;background:#f9fafb;min-width:0}
.tile .k{font-size:12px;color:#4b5563}.tile .v{font-size:20px;font-weight:650}.tile .ci{font-size:12px;color:#4b5563}
.tile.headline,.tile.m-act{flex-basis:100%}.tile.headline{border-color:#9ca3af}
svg text{font-size:11px;fill:#374151}svg text.small{font-size:10px}svg text.light{fill:#fff}
.axis line{stroke:#9ca3af}.axis line.grid{stroke:#eef0f3}.diag{stroke:#9ca3af;stroke-dasharray:4 3}.line{fill:none;stroke:#2563eb;stroke-width:2}
.s0{fill:#2563eb}.s1{fill:#f59e0b}.earlier{fill:#9ca3af}.count{fill:#9ca3af}
table.under{font-size:12px}
.bad{color:#b91c1c;font-weight:600}.ok{color:#166534;font-weight:600}.muted{color:#6b7280}
.sentence{font-size:17px;font-weight:600;margin:6px 0 4px}.nowrap{white-space:nowrap}.model{margin:0 0 8px}
.changed{background:#fef3c7;border:1px solid #f59e0b;border-radius:6px;padding:6px 10px;font-weight:600}
table.verdict{margin:0;width:100%}table.verdict td,table.verdict th{text-align:left;vertical-align:top;font-size:13px;padding:3px 7px}
.rules{columns:3 300px;column-gap:24px;font-size:12px;color:#374151;margin:8px 0 0}.rules div{break-inside:avoid;margin-bottom:4px}.rules dt{font-weight:600}.rules dd{margin:0}
@media (min-width:1600px){.verdict-wrap{display:grid;grid-template-columns:minmax(0,1fr) 330px;gap:20px;align-items:start}.rules{columns:auto;margin:0}}
.mark{display:inline-block;min-width:2.6em;text-align:center;border-radius:4px;padding:0 4px;margin-right:4px;font-weight:650;font-size:12px}
.m-ok .mark{background:#dcfce7;color:#166534}.m-look .mark{background:#fef3c7;color:#92400e}.m-act .mark{background:#fee2e2;color:#991b1b}.m-na .mark{background:#f3f4f6;color:#4b5563}
td.m-act{background:#fff7f7}td.m-look{background:#fffdf5}
.gate{color:#991b1b;font-weight:600}p.gate{margin:4px 0}
`;

/** A band: one question's cards in columns of one chart's width (see the file comment); `wide` parts span every column. */
export function band(cards: string[], wide: string[] = []): string {
  return `<div class="band">${cards.join("")}${wide.map((w) => `<div class="card wide">${w}</div>`).join("")}</div>`;
}

/** A tile: a figure, its interval or note when there is one; `headline` takes the whole row; `gate` names the conditions it broke. */
export interface Tile {
  label: string;
  value: string;
  interval?: string | undefined;
  headline?: boolean;
  gate?: string[] | undefined;
}

/** Headline tiles: a figure, its interval when there is one, and a breach of the gate marked on it. */
export function tiles(items: Tile[]): string {
  return `<div class="tiles">${items
    .map(
      (t) =>
        `<div class="tile${t.headline ? " headline" : ""}${t.gate?.length ? " m-act" : ""}"><div class="k">${escapeHtml(t.label)}</div><div class="v">${escapeHtml(t.value)}</div>${t.interval ? `<div class="ci">${escapeHtml(t.interval)}</div>` : ""}${(t.gate ?? []).map((g) => `<div class="gate">✗ gate ${escapeHtml(g)}</div>`).join("")}</div>`,
    )
    .join("")}</div>`;
}

/** The header: what the page is about, as label/value pairs (values are HTML). */
export function provenanceList(items: [string, string][]): string {
  return `<dl class="prov">${items.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${v}</dd>`).join("")}</dl>`;
}

/** A whole page. Its card columns are as wide as its widest chart, so every chart keeps the one scale. */
export function page(title: string, body: string): string {
  const widest = Math.max(Math.round(W * CHART_SCALE), ...[...body.matchAll(/data-w="(\d+)"/g)].map((m) => Number(m[1])));
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><style>:root{--card:${widest + 22}px}${CSS}</style></head>
<body><h1>${escapeHtml(title)}</h1>
${body}
</body></html>
`;
}

/** A plain table. */
export function table(head: string[], rows: (string | number)[][]): string {
  return `<table><thead><tr>${head.map((h) => `<th>${escapeHtml(h)}</th>`).join("")}</tr></thead><tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${escapeHtml(String(c))}</td>`).join("")}</tr>`).join("")}</tbody></table>`;
}
