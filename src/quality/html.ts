/**
 * Self-contained HTML: inline CSS and SVG charts, no script, no network
 * request. Every chart has a text title, an accessible description and a
 * table of its numbers beside it, for screen readers and copy-paste.
 */

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);
}

export const num = (x: number | undefined, digits = 3) => (x === undefined || !Number.isFinite(x) ? "n/a" : x.toFixed(digits));
export const pct = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? "n/a" : `${(x * 100).toFixed(1)}%`);

let chartId = 0;

/** A chart: SVG plus the table of its numbers. */
function figure(title: string, svg: string, table: { head: string[]; rows: (string | number)[][] }): string {
  const id = `c${++chartId}`;
  const cells = (r: (string | number)[], tag: string) => r.map((c) => `<${tag}>${escapeHtml(String(c))}</${tag}>`).join("");
  return `<figure class="chart" data-chart="${escapeHtml(title)}">
<figcaption id="${id}">${escapeHtml(title)}</figcaption>
<svg role="img" aria-labelledby="${id}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" xmlns="http://www.w3.org/2000/svg">${svg}</svg>
<details><summary>numbers</summary><table><thead><tr>${cells(table.head, "th")}</tr></thead><tbody>${table.rows.map((r) => `<tr>${cells(r, "td")}</tr>`).join("")}</tbody></table></details>
</figure>`;
}

const W = 340;
const H = 230;
const PAD = { left: 58, right: 12, top: 24, bottom: 44 };
const plotW = W - PAD.left - PAD.right;
const plotH = H - PAD.top - PAD.bottom;
const xAt = (f: number) => PAD.left + f * plotW;
const yAt = (f: number) => PAD.top + (1 - f) * plotH;

function axes(yMax: number, yLabel: string, xLabel: string, yFormat: (v: number) => string = (v) => num(v, 2)): string {
  let s = `<g class="axis"><line x1="${xAt(0)}" y1="${yAt(0)}" x2="${xAt(1)}" y2="${yAt(0)}"/><line x1="${xAt(0)}" y1="${yAt(0)}" x2="${xAt(0)}" y2="${yAt(1)}"/>`;
  for (const f of [0, 0.5, 1]) s += `<text x="${xAt(0) - 4}" y="${yAt(f) + 4}" text-anchor="end">${yFormat(f * yMax)}</text>`;
  s += `<text x="${xAt(0.5)}" y="${H - 6}" text-anchor="middle">${escapeHtml(xLabel)}</text>`;
  s += `<text transform="translate(12 ${yAt(0.5)}) rotate(-90)" text-anchor="middle">${escapeHtml(yLabel)}</text></g>`;
  return s;
}

/** Bars for labelled categories; one or two series (e.g. gold and predicted shares). */
export function barChart(title: string, labels: string[], series: { name: string; values: number[] }[], yLabel = "share"): string {
  const max = Math.max(1e-9, ...series.flatMap((s) => s.values));
  const yMax = max <= 1 && yLabel === "share" ? Math.min(1, Math.ceil(max * 10) / 10) : max;
  const group = plotW / Math.max(labels.length, 1);
  const bar = (group * 0.8) / series.length;
  let svg = axes(yMax, yLabel, "", yLabel === "share" ? (v) => pct(v) : (v) => num(v, 0));
  labels.forEach((label, i) => {
    series.forEach((s, j) => {
      const v = s.values[i] ?? 0;
      const h = (v / yMax) * plotH;
      svg += `<rect class="s${j}" x="${PAD.left + i * group + group * 0.1 + j * bar}" y="${yAt(0) - h}" width="${bar}" height="${h}"><title>${escapeHtml(`${label} ${s.name}: ${yLabel === "share" ? pct(v) : v}`)}</title></rect>`;
    });
    const text = label.length > 10 ? `${label.slice(0, 9)}…` : label;
    svg += `<text x="${PAD.left + (i + 0.5) * group}" y="${yAt(0) + 14}" text-anchor="middle">${escapeHtml(text)}</text>`;
  });
  if (series.length > 1) svg += legend(series.map((s) => s.name));
  return figure(title, svg, {
    head: ["label", ...series.map((s) => s.name)],
    rows: labels.map((l, i) => [l, ...series.map((s) => (yLabel === "share" ? pct(s.values[i]) : String(s.values[i] ?? 0)))]),
  });
}

function legend(names: string[]): string {
  // Above the plot, so it never covers a bar.
  return names
    .map(
      (n, j) => `<rect class="s${j}" x="${PAD.left + j * 90}" y="4" width="10" height="10"/><text x="${PAD.left + 14 + j * 90}" y="13">${escapeHtml(n)}</text>`,
    )
    .join("");
}

/** A histogram over [lo, hi] from bin counts. */
export function histogram(title: string, counts: number[], lo: number, hi: number, xLabel: string): string {
  const max = Math.max(1, ...counts);
  const w = plotW / counts.length;
  let svg = axes(max, "rows", xLabel, (v) => num(v, 0));
  counts.forEach((c, i) => {
    const h = (c / max) * plotH;
    const a = lo + ((hi - lo) * i) / counts.length;
    const b = lo + ((hi - lo) * (i + 1)) / counts.length;
    svg += `<rect class="s0" x="${PAD.left + i * w + 0.5}" y="${yAt(0) - h}" width="${Math.max(w - 1, 0.5)}" height="${h}"><title>${num(a, 2)}-${num(b, 2)}: ${c}</title></rect>`;
  });
  for (const f of [0, 0.5, 1]) svg += `<text x="${xAt(f)}" y="${yAt(0) + 14}" text-anchor="middle">${num(lo + (hi - lo) * f, 2)}</text>`;
  return figure(title, svg, {
    head: ["from", "to", "rows"],
    rows: counts.map((c, i) => [num(lo + ((hi - lo) * i) / counts.length, 3), num(lo + ((hi - lo) * (i + 1)) / counts.length, 3), c]),
  });
}

/** Reliability diagram: accuracy per confidence bin against the diagonal, with bin counts. */
export function reliabilityDiagram(title: string, bins: { lo: number; hi: number; count: number; confidence: number; accuracy: number }[]): string {
  let svg = axes(1, "accuracy", "confidence (top-label probability)");
  svg += `<line class="diag" x1="${xAt(0)}" y1="${yAt(0)}" x2="${xAt(1)}" y2="${yAt(1)}"/>`;
  const maxCount = Math.max(1, ...bins.map((b) => b.count));
  for (const b of bins) {
    if (b.count === 0) continue;
    const x = xAt(b.lo);
    const w = xAt(b.hi) - x;
    svg += `<rect class="s0" x="${x + 0.5}" y="${yAt(b.accuracy)}" width="${w - 1}" height="${yAt(0) - yAt(b.accuracy)}"><title>${num(b.lo, 2)}-${num(b.hi, 2)}: accuracy ${num(b.accuracy)}, confidence ${num(b.confidence)}, ${b.count} rows</title></rect>`;
    svg += `<rect class="count" x="${x + 0.5}" y="${yAt(0) - 6 * (b.count / maxCount)}" width="${w - 1}" height="${6 * (b.count / maxCount)}"/>`;
    svg += `<text class="small" x="${x + w / 2}" y="${yAt(b.accuracy) - 3}" text-anchor="middle">${b.count}</text>`;
  }
  for (const f of [0, 0.5, 1]) svg += `<text x="${xAt(f)}" y="${yAt(0) + 14}" text-anchor="middle">${num(f, 1)}</text>`;
  return figure(title, svg, {
    head: ["bin", "rows", "mean confidence", "accuracy", "gap"],
    rows: bins
      .filter((b) => b.count > 0)
      .map((b) => [`${num(b.lo, 3)}-${num(b.hi, 3)}`, b.count, num(b.confidence), num(b.accuracy), num(b.accuracy - b.confidence)]),
  });
}

/** A line over coverage 0..1 (the risk-coverage curve as accuracy against coverage). */
export function coverageCurve(title: string, points: { coverage: number; accuracy: number; threshold: number }[]): string {
  const minAcc = Math.min(1, ...points.map((p) => p.accuracy));
  const lo = Math.max(0, Math.floor(minAcc * 10) / 10 - 0.1);
  const y = (a: number) => yAt((a - lo) / (1 - lo));
  let svg = `<g class="axis"><line x1="${xAt(0)}" y1="${yAt(0)}" x2="${xAt(1)}" y2="${yAt(0)}"/><line x1="${xAt(0)}" y1="${yAt(0)}" x2="${xAt(0)}" y2="${yAt(1)}"/>`;
  for (const f of [0, 0.5, 1])
    svg += `<text x="${xAt(0) - 4}" y="${yAt(f) + 4}" text-anchor="end">${num(lo + f * (1 - lo), 2)}</text><text x="${xAt(f)}" y="${yAt(0) + 14}" text-anchor="${f === 1 ? "end" : "middle"}">${Math.round(f * 100)}%</text>`;
  svg += `<text x="${xAt(0.5)}" y="${H - 6}" text-anchor="middle">coverage (most confident rows first)</text><text transform="translate(12 ${yAt(0.5)}) rotate(-90)" text-anchor="middle">accuracy</text></g>`;
  svg += `<polyline class="line" points="${points.map((p) => `${xAt(p.coverage).toFixed(1)},${y(p.accuracy).toFixed(1)}`).join(" ")}"/>`;
  const table = points.filter((p) => Math.round(p.coverage * 100) % 10 === 0 || p.coverage === 0.05);
  return figure(title, svg, {
    head: ["coverage", "accuracy", "confidence threshold"],
    rows: table.map((p) => [pct(p.coverage), num(p.accuracy), num(p.threshold)]),
  });
}

/** Confusion matrix as a heat map: rows gold, columns predicted, counts in the cells. */
export function heatMap(title: string, labels: string[], matrix: number[][]): string {
  const k = labels.length;
  const size = Math.min(plotW, plotH) / Math.max(k, 1);
  const max = Math.max(1, ...matrix.flat());
  let svg = "";
  const left = PAD.left + 30;
  matrix.forEach((row, r) =>
    row.forEach((v, c) => {
      const t = v / max;
      svg += `<rect x="${left + c * size}" y="${PAD.top + r * size}" width="${size - 1}" height="${size - 1}" fill="rgba(37, 99, 235, ${(0.08 + 0.92 * t).toFixed(3)})"><title>gold ${escapeHtml(labels[r] as string)}, predicted ${escapeHtml(labels[c] as string)}: ${v}</title></rect>`;
      if (k <= 12)
        svg += `<text class="${t > 0.55 ? "light" : ""}" x="${left + c * size + size / 2}" y="${PAD.top + r * size + size / 2 + 4}" text-anchor="middle">${v}</text>`;
    }),
  );
  labels.forEach((l, i) => {
    const text = escapeHtml(l.length > 6 ? `${l.slice(0, 5)}…` : l);
    if (k <= 16) {
      svg += `<text class="small" x="${left - 4}" y="${PAD.top + i * size + size / 2 + 3}" text-anchor="end">${text}</text>`;
      svg += `<text class="small" x="${left + i * size + size / 2}" y="${PAD.top + k * size + 12}" text-anchor="middle">${text}</text>`;
    }
  });
  svg += `<text x="${left + (k * size) / 2}" y="${PAD.top + k * size + 28}" text-anchor="middle">predicted</text><text transform="translate(12 ${PAD.top + (k * size) / 2}) rotate(-90)" text-anchor="middle">gold</text>`;
  return figure(title, svg, { head: ["gold \\ predicted", ...labels], rows: matrix.map((row, r) => [labels[r] as string, ...row]) });
}

const CSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1240px;padding:16px 24px;color:#1f2937;background:#fff}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #e5e7eb;padding:3px 8px;text-align:right}th{background:#f9fafb}td:first-child,th:first-child{text-align:left}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{margin:0;border:1px solid #e5e7eb;border-radius:6px;padding:8px}
figcaption{font-weight:600;margin-bottom:4px}details{font-size:12px}
svg text{font-size:11px;fill:#374151}svg text.small{font-size:9px}svg text.light{fill:#fff}
.axis line{stroke:#9ca3af}.diag{stroke:#9ca3af;stroke-dasharray:4 3}.line{fill:none;stroke:#2563eb;stroke-width:2}
.s0{fill:#2563eb}.s1{fill:#f59e0b}.count{fill:#9ca3af}
.q{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.q .charts{flex:1;min-width:400px}.tables{min-width:300px}h3{font-size:14px;margin:10px 0 4px}
.bad{color:#b91c1c;font-weight:600}.muted{color:#6b7280}
`;

/** A whole page. */
export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><style>${CSS}</style></head>
<body><h1>${escapeHtml(title)}</h1>
${body}
</body></html>
`;
}

/** A plain table. */
export function table(head: string[], rows: (string | number)[][]): string {
  return `<table><thead><tr>${head.map((h) => `<th>${escapeHtml(h)}</th>`).join("")}</tr></thead><tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${escapeHtml(String(c))}</td>`).join("")}</tr>`).join("")}</tbody></table>`;
}

/** The most confident suspect gold labels (`assess --suspects`): what a reviewer should look at first. */
export function suspectsSection(rows: { id: string; question: string; gold: string; model_label: string; probability: number }[], total: number): string {
  const head = `<h2>Suspect gold labels <span class="muted">(${total}${total > rows.length ? `; the ${rows.length} most confident` : ""})</span></h2>`;
  return `<section class="suspects">${head}${table(
    ["id", "question", "gold", "model", "probability"],
    rows.map((r) => [r.id, r.question, r.gold, r.model_label, num(r.probability)]),
  )}</section>`;
}
