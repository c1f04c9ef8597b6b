/**
 * The metric table is the one declaration of assess's metrics: the JSON, the
 * terminal table, the HTML report, the gate and docs/metrics.md all come
 * from it. Adding a metric is one entry: shown here by adding two (one
 * resampled, one computed once and printed as a percent) to a copy of the
 * table and finding them everywhere.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { assess, describeAssessment, parseConditions } from "../../src/quality/assess.js";
import { failedConditions } from "../../src/quality/verdict.js";
import { gateName, isWeighted, METRIC_TABLE, metricsMarkdown, metricText, type Metric } from "../../src/quality/metric-table.js";
import { assessmentHtml } from "../../src/quality/pages.js";
import { findKind } from "../../src/questions/index.js";

const DOC = new URL("../../docs/metrics.md", import.meta.url);
const ANSWERS = "test/golden/answers.jsonl";
const GOLD = "test/golden/gold.csv";

/** Two new metrics, one entry each. */
const recallYes: Metric = {
  name: "recall_yes",
  column: "agreement",
  label: "recall of yes",
  doc: "Share of gold-yes rows answered yes.",
  types: ["noul"],
  better: "higher",
  range: [0, 1],
  digits: 3,
  weighted: ({ m }) => (m[3] as number) / ((m[2] as number) + (m[3] as number)),
  interval: "bootstrap",
};
const sureShare: Metric = {
  name: "sure_share",
  column: "calibration",
  label: "share answered at 0.9+",
  doc: "Share of rows whose top-label probability is at least 0.9.",
  types: ["noul", "choice", "score"],
  better: "higher",
  range: [0, 1],
  digits: 1,
  percent: true,
  gate: "sure",
  whole: ({ d }) => d.confidence.filter((c) => c >= 0.9).length / d.s.n,
};

describe("the metric table", () => {
  it("declares each metric once: unique names and gate names, bootstrap intervals only on resampled metrics", () => {
    const names = METRIC_TABLE.map((m) => m.name);
    expect(new Set(names).size).toBe(names.length);
    expect(new Set(METRIC_TABLE.map(gateName)).size).toBe(names.length);
    for (const m of METRIC_TABLE) {
      // "every" type, or named types that are registered: a misspelt type would make a metric apply to nothing.
      if (m.types !== "every") for (const type of m.types) expect(findKind(type), `${m.name}: ${type}`).toBeDefined();
      if (m.interval === "bootstrap") expect(isWeighted(m), m.name).toBe(true);
    }
    expect(metricText(sureShare, 0.1234)).toBe("12.3%");
    expect(metricText(recallYes, Number.NaN)).toBe("n/a");
  });

  it("docs/metrics.md is the table's page (UPDATE_DOCS=1 rewrites it)", () => {
    if (process.env["UPDATE_DOCS"] === "1") writeFileSync(DOC, metricsMarkdown());
    expect(existsSync(DOC), "docs/metrics.md is missing: run UPDATE_DOCS=1 npx vitest run test/quality/metric-table.test.ts").toBe(true);
    expect(readFileSync(DOC, "utf8"), "docs/metrics.md is out of date: run UPDATE_DOCS=1 npx vitest run test/quality/metric-table.test.ts").toBe(
      metricsMarkdown(),
    );
    for (const m of METRIC_TABLE) expect(metricsMarkdown()).toContain(`| \`${m.name}\` | ${m.label} |`);
  });

  it("a new entry reaches the JSON, its interval, the terminal table, the HTML, the gate and the docs", { timeout: 30_000 }, async () => {
    const table = [...METRIC_TABLE, recallYes, sureShare];
    const a = await assess(ANSWERS, GOLD, { bootstrap: 30, metrics: table });
    const urgent = a.questions.find((q) => q.name === "urgent")!;
    const team = a.questions.find((q) => q.name === "team")!;
    // JSON: the new metrics after the others, in table order; recall of yes from the confusion matrix, with its interval.
    expect(Object.keys(urgent.metrics).slice(-2)).toEqual(["recall_yes", "sure_share"]);
    const yes = urgent.confusion[1]!;
    expect(urgent.metrics["recall_yes"]).toBeCloseTo(yes[1]! / (yes[0]! + yes[1]!), 12);
    const [lo, hi] = urgent.intervals["recall_yes"]!;
    expect(lo).toBeLessThanOrEqual(urgent.metrics["recall_yes"]!);
    expect(hi).toBeGreaterThanOrEqual(urgent.metrics["recall_yes"]!);
    expect(hi).toBeGreaterThan(lo);
    expect(team.metrics["recall_yes"]).toBeUndefined();
    expect(team.metrics["sure_share"]).toBeGreaterThan(0);
    // The existing figures are untouched by the additions.
    const plain = await assess(ANSWERS, GOLD, { bootstrap: 30 });
    expect(plain.questions[0]!.metrics).toEqual(Object.fromEntries(Object.entries(urgent.metrics).slice(0, -2)));
    expect(plain.questions[0]!.intervals["auroc"]).toEqual(urgent.intervals["auroc"]);

    const text = describeAssessment(a, table);
    expect(text).toMatch(new RegExp(`recall of yes +${urgent.metrics["recall_yes"]!.toFixed(3)}  \\[${lo.toFixed(3)}, ${hi.toFixed(3)}\\]`));
    expect(text).toContain(`share answered at 0.9+  ${(team.metrics["sure_share"]! * 100).toFixed(1)}%`);

    const html = assessmentHtml(a, { metrics: table });
    // A headline tile (it has an interval), and a row of the numbers table with its direction.
    expect(html).toContain(`95%: ${lo.toFixed(3)} – ${hi.toFixed(3)}`);
    expect(html).toContain("recall of yes ↑");
    expect(html).toContain("share answered at 0.9+ ↑");

    // The gate takes the declared --fail-if names: sure_share is gated as "sure".
    const breached = failedConditions(a, parseConditions(`urgent.recall_yes<1.01,sure<0`), table);
    expect(breached.map((b) => `${b.question}.${b.condition.metric}`)).toEqual(["urgent.recall_yes"]);
    expect(() => failedConditions(a, parseConditions("urgent.sure_share<0"), table)).toThrow(/has no metric "sure_share"/);

    expect(metricsMarkdown(table)).toContain("| `recall_yes` | recall of yes | noul | higher | 0 to 1 | bootstrap, 95% | gold rows |");
    expect(metricsMarkdown(table)).toContain("| `sure` | share answered at 0.9+ | noul, choice, score | higher | 0 to 1 | – | gold rows |");
  });
});
