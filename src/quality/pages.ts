/**
 * The HTML page of `assess --html` and `report`: one builder for both, since
 * each command may hold both inputs (`assess --compare`, `report --gold`).
 * The verdict comes first (the sentence, the models, one row per question
 * and the rules beside it), then what was measured, then each question's
 * detail, linked from its row: numbers, charts against gold, and the
 * earlier run's distributions against tonight's.
 */
import { kindOf } from "../questions/index.js";
import { displayLabels } from "./answers.js";
import type { Assessment, QuestionAssessment } from "./assess.js";
import {
  band,
  barChart,
  coverageCurve,
  displayPath,
  escapeHtml,
  heatMap,
  histogram,
  page,
  provenanceList,
  rangeText,
  reliabilityDiagram,
  table,
  type Tile,
  tiles,
} from "./html.js";
import {
  classGateName,
  gateName,
  headlineOf,
  leastPreciseClass,
  METRIC_TABLE,
  type Metric,
  metricsOf,
  metricText,
  noiseFloorText,
  VERDICT_COLUMN_LIST,
  weakestClass,
} from "./metric-table.js";
import { inSampleText, isInSample } from "./sample.js";
import { intervalText, num, pct, plural, tally } from "./numbers.js";
import { provenanceRows } from "./provenance.js";
import { PSI_EPSILON, type QuestionStats, type RunReport, type Shift, suspectsHtml } from "./report.js";
import type { GateRecord } from "./gate.js";
import { buildVerdict, type QuestionVerdict, type Verdict } from "./verdict.js";

/** What a page shows: the verdict, and whichever of an assessment and a run report the command made. */
export interface PageInputs {
  title: string;
  verdict: Verdict;
  assessment?: Assessment | undefined;
  report?: RunReport | undefined;
  gate?: GateRecord | undefined;
  /** The metrics shown (default: all of assess's). */
  metrics?: readonly Metric[];
}

/** The anchor of a question's detail. */
export const anchorOf = (name: string) => `q-${encodeURIComponent(name).replace(/%/g, "_")}`;

const markClass = (mark: string) => `m-${mark === "n/a" ? "na" : mark}`;

function cellHtml(cell: QuestionVerdict["cells"][keyof QuestionVerdict["cells"]]): string {
  const text = cell.text.replace(/^n\/a: /, "").replace(/; ✗ gate .*$/, "");
  const gate = (cell.gate ?? []).map((g) => `<div class="gate">✗ gate ${escapeHtml(g)}</div>`).join("");
  return `<td class="${markClass(cell.mark)}"><span class="mark">${cell.mark}</span>${escapeHtml(text)}${gate}</td>`;
}

/** The verdict at the top of a page: the sentence, the models, the table with the rules beside it. */
export function verdictHtml(v: Verdict): string {
  const head = `<tr><th>question</th>${VERDICT_COLUMN_LIST.map((c) => `<th>${escapeHtml(c.label)}</th>`).join("")}</tr>`;
  const rows = v.questions
    .map(
      (q) =>
        `<tr data-question="${escapeHtml(q.name)}"><td class="${markClass(q.mark)}"><span class="mark">${q.mark}</span><a href="#${anchorOf(q.name)}">${escapeHtml(q.name)}</a> <span class="muted">${q.type}</span></td>${VERDICT_COLUMN_LIST.map((c) => cellHtml(q.cells[c.key])).join("")}</tr>`,
    )
    .join("");
  const general: [string, string][] = [
    ["every column", v.common_rule],
    ["the mark", v.mark_rule],
    ["the gold sample", v.sample_rule],
  ];
  const rules = `<dl class="rules">${[...VERDICT_COLUMN_LIST.map((c): [string, string] => [c.label, c.rule]), ...general].map(([dt, dd]) => `<div><dt>${escapeHtml(dt)}</dt><dd>${escapeHtml(dd)}</dd></div>`).join("")}</dl>`;
  const model = v.model.warn ? `<p class="model changed">${escapeHtml(v.model.text)}</p>` : `<p class="model muted">${escapeHtml(v.model.text)}</p>`;
  const sample = v.sample ? `<p class="model changed sample">${escapeHtml(v.sample)}</p>` : "";
  // An option and its argument stay on one line: "add --compare <earlier answers>" is read, and copied, whole.
  const sentence = escapeHtml(v.sentence).replace(/--[a-z-]+(?: &lt;[^&]*&gt;)?/g, (option) => `<span class="nowrap">${option}</span>`);
  return `<section class="verdict-section"><p class="sentence ${markClass(v.mark)}"><span class="mark">${v.mark}</span>${sentence}</p>${model}${sample}<div class="verdict-wrap"><table class="verdict"><thead>${head}</thead><tbody>${rows}</tbody></table>${rules}</div></section>`;
}

function gateHtml(gate: GateRecord): string {
  if (gate.breaches.length === 0) return `<p class="ok">Gate passed: ${escapeHtml(gate.conditions.join(", "))}.</p>`;
  return `<div class="card wide"><p class="bad">Gate failed: ${plural(gate.breaches.length, "breach", "breaches")} of ${escapeHtml(gate.conditions.join(", "))}</p><ul>${gate.breaches
    .map((b) => `<li>${escapeHtml(b.line)}</li>`)
    .join("")}</ul></div>`;
}

/** The gate conditions a question's metric broke (its gate key: `ece`, `recall["billing"]`). */
function breachesOf(gate: GateRecord | undefined, question: string, key: string): string[] {
  return (gate?.breaches ?? []).filter((b) => b.question === question && b.metric === key).map((b) => b.condition);
}

const mark = (broken: string[], text: string) => (broken.length ? `${text} ✗ gate ${broken.join(", ")}` : text);

/**
 * A question's assessment: numbers, classes, reliability, coverage, confusion, shares, label mass.
 * Long: one card after another in page order, each a few lines of markup; the order on the page is the order here.
 */
function assessmentCards(q: QuestionAssessment, shown: readonly Metric[], gate: GateRecord | undefined): { cards: string[] } {
  const names = displayLabels(q);
  const weakest = q.classes ? weakestClass(q.classes) : undefined;
  const least = q.classes ? leastPreciseClass(q.classes) : undefined;
  // The class figures' tiles name their class and its counts.
  const classTile: Record<string, { label: string; count: string } | undefined> = {
    weakest_recall: weakest && {
      label: `recall of ${weakest.label}, the weakest class${weakest.rare ? " (rare)" : ""}`,
      count: `${tally(weakest.hits)} of ${tally(weakest.gold)} found`,
    },
    weakest_precision: least && {
      label: `precision of ${least.label}, the least precise class${least.rare ? " (rare)" : ""}`,
      count: `${tally(least.hits)} of ${tally(least.predicted)} answers right`,
    },
  };
  const tileOf = (m: Metric, headline = false): Tile => {
    const ci = q.intervals[m.name];
    const named = classTile[m.name];
    return {
      label: named?.label ?? m.label,
      value: metricText(m, q.metrics[m.name]),
      interval: ci ? `95%: ${metricText(m, ci[0])} – ${metricText(m, ci[1])}${named ? `; ${named.count}` : ""}` : undefined,
      headline,
      gate: breachesOf(gate, q.name, gateName(m)),
    };
  };
  // The headline figures: the metrics with an interval; when a class is rare, the class figures first and each alone on its row, where accuracy could hide them.
  const isClassFigure = (m: Metric) => m.name in classTile;
  const headline = headlineOf(q.type, shown).filter((m) => q.metrics[m.name] !== undefined && (!isClassFigure(m) || q.headline === "weakest_recall"));
  const first = headline.filter(isClassFigure).map((m) => tileOf(m, true));
  const rest = headline.filter((m) => !isClassFigure(m)).map((m) => tileOf(m));
  const rows = metricsOf(q.type, shown).map((m) => [
    `${m.label} ${m.better === "lower" ? "↓" : "↑"}`,
    mark(breachesOf(gate, q.name, gateName(m)), metricText(m, q.metrics[m.name])),
  ]);
  rows.push(["ECE at this n", noiseFloorText(q.ece_noise_floor)]);
  const ece = q.metrics["ece"] as number;
  const inSample = q.sample?.in_sample;
  const eceNote =
    (ece > q.ece_noise_floor.p95
      ? `<p class="bad">ECE ${num(ece)} is above its noise floor ${num(q.ece_noise_floor.p95)}, what a calibrated model stays under at this n: calibrate.</p>`
      : `<p>ECE ${num(ece)} is within its noise floor ${num(q.ece_noise_floor.p95)}, what a calibrated model stays under at this n.</p>`) +
    (isInSample(inSample) && inSample ? `<p class="bad">${escapeHtml(inSampleText(inSample))}.</p>` : "");
  const cards = [
    `<div class="card numbers"><h3>${escapeHtml(q.name)} in numbers</h3>${tiles([...first, ...rest])}${table(["metric (↑ higher is better, ↓ lower)", "value"], rows)}${eceNote}</div>`,
  ];
  if (q.classes) {
    // A figure over its interval, marked when the gate broke on it; the conditions themselves under the table, where they have room.
    const broke: string[] = [];
    const figure = (value: number | null, interval: [number, number] | null, broken: string[]) => {
      broke.push(...broken);
      return `${value === null ? "n/a" : num(value)}${interval ? `<div class="sub">${intervalText(interval)}</div>` : ""}${broken.length ? '<div class="gate">✗ gate</div>' : ""}`;
    };
    const rows = q.classes
      .map(
        (c) =>
          `<tr${c.rare ? ' class="rare"' : ""}><td>${escapeHtml(c.label)}${c.rare ? ' <span class="muted">(rare)</span>' : ""}</td><td>${tally(c.gold)}<div class="sub">${pct(c.share)}</div></td><td>${figure(c.recall, c.recall_interval, breachesOf(gate, q.name, classGateName("recall", c.label)))}</td><td>${figure(c.precision, c.precision_interval, breachesOf(gate, q.name, classGateName("precision", c.label)))}</td></tr>`,
      )
      .join("");
    cards.push(
      `<div class="card classes"><h3>${escapeHtml(q.name)} per class</h3><table><thead><tr><th>class</th><th>gold rows</th><th>recall</th><th>precision</th></tr></thead><tbody>${rows}</tbody></table>${broke.map((b) => `<p class="gate">✗ gate ${escapeHtml(b)}</p>`).join("")}<p class="muted">Under each figure its 95% Wilson interval; rare: under 10% of the gold rows.</p></div>`,
    );
  }
  cards.push(
    reliabilityDiagram(`${q.name}: reliability`, q.reliability),
    coverageCurve(`${q.name}: accuracy against coverage`, q.risk_coverage.curve, {
      head: ["most confident", "accuracy", "confidence at least"],
      rows: q.risk_coverage.at.map((p) => [pct(p.coverage), num(p.accuracy), num(p.threshold)]),
    }),
    heatMap(`${q.name}: confusion (gold × predicted)`, names, q.confusion),
    barChart(`${q.name}: gold and predicted shares`, names, [
      { name: "gold", values: q.gold_shares },
      { name: "predicted", values: q.predicted_shares },
    ]),
  );
  if (q.label_mass) {
    cards.push(
      barChart(
        `${q.name}: accuracy by label mass`,
        q.label_mass.map((b) => `${rangeText(b.mass_lo, b.mass_hi)} (${tally(b.count)})`),
        [{ name: "accuracy", values: q.label_mass.map((b) => b.accuracy) }],
        { format: "number", xLabel: "accuracy (label-mass fifth, rows)", fixedMax: 1 },
      ),
    );
  }
  return { cards };
}

/**
 * A question of a run report: its numbers (with drift against the earlier
 * run), its distributions earlier and now. Beside an assessment only the
 * comparison is drawn: the assessment's cards already show tonight's shares,
 * confidence and label mass.
 */
function reportCards(s: QuestionStats, shift: Shift | undefined, gate: GateRecord | undefined, assessed: boolean): { cards: string[]; wide: string[] } {
  if (assessed && !shift) return { cards: [], wide: [] };
  const names = displayLabels(s);
  const shares = s.label_counts.map((c) => c / (s.n || 1));
  const items: Tile[] = [{ label: "rows", value: tally(s.n) }];
  items.push({
    label: "mean label mass",
    value: s.mean_label_mass === undefined ? "n/a" : num(s.mean_label_mass),
    interval: s.mean_label_mass === undefined ? "the answers carry none" : `${plural(s.label_mass_rows ?? 0, "row")} carry it`,
    gate: breachesOf(gate, s.name, "label_mass"),
  });
  if (shift) {
    items.push({ label: "PSI", value: num(shift.psi), interval: shift.psi_basis, gate: breachesOf(gate, s.name, "psi") });
    items.push({ label: "JS distance", value: num(shift.js_distance), interval: "of the top-label shares", gate: breachesOf(gate, s.name, "js_distance") });
    items.push({
      label: "agreement with the earlier run",
      value: shift.shared > 0 ? pct(shift.agreement) : "n/a",
      interval: shift.shared > 0 ? `${tally(shift.flipped)} of ${tally(shift.shared)} flipped` : "no id is in both runs",
      gate: breachesOf(gate, s.name, "agreement"),
    });
  }
  const head = ["label", "share now", ...(shift ? ["earlier"] : [])];
  const rows = names.map((n, i) => [n, pct(shares[i]), ...(shift ? [pct(shift.earlier_shares[i])] : [])]);
  const numbers = `<div class="card numbers"><h3>${escapeHtml(s.name)}: ${shift ? "tonight against the earlier run" : "the answers"}</h3>${tiles(items)}${table(head, rows)}${
    shift?.earlier_label_mass !== undefined ? `<p class="muted">Mean label mass earlier: ${num(shift.earlier_label_mass)}.</p>` : ""
  }</div>`;
  const cards = [numbers];
  cards.push(
    barChart(
      shift ? `${s.name}: label shares, earlier and now` : `${s.name}: label shares`,
      names,
      shift
        ? [
            { name: "earlier", values: shift.earlier_shares, tone: "earlier" },
            { name: "now", values: shares },
          ]
        : [{ name: "rows", values: shares }],
    ),
  );
  const value = kindOf(s).value;
  if (value) {
    const series = shift?.earlier_value_histogram
      ? [
          { name: "earlier", values: shift.earlier_value_histogram, tone: "earlier" as const },
          { name: "now", values: s.value_histogram },
        ]
      : [{ name: "rows", values: s.value_histogram }];
    cards.push(histogram(`${s.name}: ${value.title}${shift ? ", earlier and now" : ""}`, series, 0, value.top(s), value.axis));
  }
  if (assessed) return { cards, wide: flipsOf(shift) };
  cards.push(histogram(`${s.name}: confidence`, [{ name: "rows", values: s.confidence_histogram }], 0, 1, "top-label probability"));
  if (s.label_mass_histogram)
    cards.push(histogram(`${s.name}: label mass`, [{ name: "rows", values: s.label_mass_histogram }], 0, 1, "share of next-token probability on the labels"));
  return { cards, wide: flipsOf(shift) };
}

/** The records whose label flipped since the earlier run, most confident first, under a summary line. */
function flipsOf(shift: Shift | undefined): string[] {
  if (!shift || shift.flips.length === 0) return [];
  return [
    `<details><summary>${plural(shift.flipped, "record")} flipped since the earlier run (the ${shift.flips.length} most confident now shown)</summary>${table(
      ["id", "earlier", "now", "confidence now"],
      shift.flips.map((f) => [f.id, f.from, f.to, num(f.confidence)]),
    )}</details>`,
  ];
}

function compareHtml(r: RunReport, gate: GateRecord | undefined): string {
  const c = r.compare;
  if (!c) return "";
  const shared = c.shifts[0]?.shared ?? 0;
  const cell = (question: string, key: string, text: string) => mark(breachesOf(gate, question, key), text);
  return `<h2>Compared with ${escapeHtml(displayPath(c.answers))}</h2><p>${plural(c.rows, "earlier row")}; ids in both runs: ${tally(shared)}${
    shared === 0 ? " (agreement cannot be measured: no id is in both runs)" : ""
  }. PSI: 0.1 is worth a look, 0.25 a real shift; an empty bin counts as ${PSI_EPSILON} of the rows.</p>${table(
    ["question", "PSI", "PSI over", "JS distance", "agreement", "flipped", "label mass earlier", "label mass now"],
    c.shifts.map((s) => {
      const q = r.questions.find((x) => x.name === s.question);
      return [
        s.question,
        cell(s.question, "psi", num(s.psi)),
        s.psi_basis,
        cell(s.question, "js_distance", num(s.js_distance)),
        cell(s.question, "agreement", s.shared > 0 ? pct(s.agreement) : "n/a"),
        tally(s.flipped),
        num(s.earlier_label_mass),
        cell(s.question, "label_mass", num(q?.mean_label_mass)),
      ];
    }),
  )}`;
}

function usageHtml(r: RunReport): string {
  const parts: string[] = [];
  if (r.usage) {
    const u = r.usage;
    // A resumed run that sent nothing has no speed to speak of.
    const speed = u.requests.sent > 0 && u.seconds > 0 ? num(u.records_per_second, 1) : "n/a";
    parts.push(
      `<h2>Usage</h2>${table(
        ["model", "records read", "answered", "failed", "requests", "retries", "429s", "529s", "input tokens", "cost (USD)", "seconds", "records/s"],
        [
          [
            u.model,
            tally(u.records.read),
            tally(u.records.answered),
            tally(u.records.failed),
            tally(u.requests.sent),
            tally(u.requests.retries),
            tally(u.requests.rate_limited),
            tally(u.requests.overloaded),
            tally(u.tokens.input),
            num(u.cost_usd, 4),
            num(u.seconds, 1),
            speed,
          ],
        ],
      )}`,
    );
  }
  if (r.errors && r.errors.total > 0) {
    parts.push(
      `<h2>Errors by reason</h2>${table(
        ["reason", "rows"],
        Object.entries(r.errors.by_type).sort((a, b) => b[1] - a[1]),
      )}`,
    );
    parts.push(
      `<details><summary>first ${plural(r.errors.examples.length, "error row")}</summary>${table(
        ["line", "id", "reason", "message"],
        r.errors.examples.map((e) => [e.line, e.id, e.type, e.message]),
      )}</details>`,
    );
  }
  return parts.join("\n");
}

/** The page of `assess --html` and `report`. */
export function qualityPage(p: PageInputs): string {
  const { assessment: a, report: r, verdict, gate } = p;
  const body: string[] = [verdictHtml(verdict)];
  if (gate) body.push(gateHtml(gate));
  const provenance = a?.provenance ?? r?.provenance;
  if (provenance) {
    const files = { ...(r?.provenance?.files ?? {}), ...(a?.provenance?.files ?? {}) };
    body.push(provenanceList(provenanceRows({ ...provenance, files }, { raw: a?.raw ?? false })));
  }
  if (a) {
    const rows = a.rows;
    body.push(
      `<p>${tally(rows.matched)} of ${plural(rows.gold, "gold row")} matched; ${plural(rows.answers_only, "answer")} without a gold label${rows.gold_only ? `; ${plural(rows.gold_only, "gold row")} without an answer` : ""}. 95% intervals from ${plural(a.bootstrap, "bootstrap draw")} (seed ${a.seed}); per class, Wilson's. Confidence is the top label's probability.</p>`,
    );
  }
  if (r) body.push(`<p>${plural(r.rows, "answered row")}${r.errors ? `, ${tally(r.errors.total)} failed` : ""}.</p>`);
  if (r) body.push(compareHtml(r, gate));
  if (r) body.push(usageHtml(r));
  const shown = p.metrics ?? METRIC_TABLE;
  for (const q of verdict.questions) {
    const assessed = a?.questions.find((x) => x.name === q.name);
    const stats = r?.questions.find((x) => x.name === q.name);
    const cards: string[] = [];
    const wide: string[] = [];
    if (assessed) cards.push(...assessmentCards(assessed, shown, gate).cards);
    if (stats) {
      const part = reportCards(
        stats,
        r?.compare?.shifts.find((x) => x.question === q.name),
        gate,
        assessed !== undefined,
      );
      cards.push(...part.cards);
      wide.push(...part.wide);
    }
    if (assessed && a?.suspects) wide.push(suspectsHtml(q.name, a.suspects));
    const n = stats?.n ?? assessed?.n ?? 0;
    const what = assessed && stats ? `${plural(stats.n, "row")}, ${tally(assessed.n)} with gold` : plural(n, "row");
    body.push(
      `<h2 id="${anchorOf(q.name)}">${escapeHtml(q.name)} <span class="muted">(${q.type}, ${what})</span> <span class="${markClass(q.mark)}"><span class="mark">${q.mark}</span></span></h2>${
        cards.length ? band(cards, wide) : `<p class="muted">No gold rows label this question.</p>`
      }`,
    );
  }
  return page(p.title, body.join("\n"));
}

/** The page of an assessment (with a run report when compared), its verdict built here: for callers without a gate. */
export function assessmentHtml(a: Assessment, options: { metrics?: readonly Metric[]; report?: RunReport } = {}): string {
  const verdict = buildVerdict({ assessment: a, report: options.report });
  return qualityPage({
    title: `Assessment: ${displayPath(a.answers)}`,
    verdict,
    assessment: a,
    report: options.report,
    ...(options.metrics ? { metrics: options.metrics } : {}),
  });
}

/** The page of a run report (with an assessment when gold was given), its verdict built here. */
export function reportHtml(r: RunReport, options: { assessment?: Assessment } = {}): string {
  const verdict = buildVerdict({ report: r, assessment: options.assessment });
  return qualityPage({ title: `Run report: ${displayPath(r.answers)}`, verdict, report: r, assessment: options.assessment, gate: r.gate });
}
