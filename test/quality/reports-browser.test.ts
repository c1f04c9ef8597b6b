/**
 * The HTML reports in a real browser, at 1,280 and 1,920 px: each opens from
 * a file URL with no network request and no console error, every chart is
 * there and visible within the viewport, no two texts overlap, every option
 * name is there whole, and a screenshot is saved for a person to look at
 * (<name>-<width>.png in $SCREENSHOTS, else in a temporary folder: tests
 * write nothing into the checkout).
 *
 * The README's pictures are these screenshots at 1,280 px: regenerate them with
 *   UPDATE_DOCS_IMG=1 npx vitest run test/quality/reports-browser.test.ts
 * (copies {assessment,run-report}-1280.png to docs/img/), and look at them.
 */
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import { assess } from "../../src/quality/assess.js";
import { assessmentHtml, reportHtml, runReport } from "../../src/quality/report.js";
import { seededRandom } from "../../src/quality/metrics.js";
import { CHROMIUM, hasChromium, launch } from "../support/browser.js";

const ROOT = resolve(import.meta.dirname, "../..");
// The fixtures live under the working directory, as a user's out/ would: a temporary one, entered for this file's tests.
const WORK = mkdtempSync(join(tmpdir(), "te-reports-browser-"));
const SHOTS = process.env["SCREENSHOTS"] ?? join(WORK, "out/screenshots");
const startedIn = process.cwd();
const WIDTHS = [1280, 1920];
let dir: string;
let browser: Browser | undefined;

if (!hasChromium) {
  process.stderr.write(
    `\n*** SKIPPED the browser tests of the HTML reports: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH) ***\n\n`,
  );
}

// One long option name: it must show whole (wrapped), never cut to "accou…".
const options = ["shipping", "billing", "product", "account access and login problems", "other"];

/** Deterministic answers and gold for three questions, in the shape `run` writes. */
function writeFixtures(n: number, seed: number, name: string, skew = 0): { answers: string; gold: string } {
  const random = seededRandom(seed);
  const answers: string[] = [];
  const gold = ["id,urgent,team,mood"];
  for (let i = 0; i < n; i++) {
    const p = random();
    const w = options.map((_, j) => random() ** 3 * (j === 0 ? 1 + skew : 1));
    const t = w.reduce((a, b) => a + b, 0);
    const pr = w.map((x) => x / t);
    const lv = [random(), random(), random(), random()];
    const lt = lv.reduce((a, b) => a + b, 0);
    const lp = lv.map((x) => x / lt);
    const choice = options[pr.indexOf(Math.max(...pr))]!;
    answers.push(
      JSON.stringify({
        id: `T${i}`,
        line: i + 1,
        source: "t.jsonl",
        model: "tiny-1.0.0",
        answers: {
          urgent: { type: "noul", noul: p },
          team: { type: "choice", choice, probabilities: Object.fromEntries(options.map((o, j) => [o, pr[j]])), confidence: 0 },
          mood: {
            type: "score",
            score: lp.reduce((e, v, k) => e + k * v, 0),
            legend: { 0: "calm", 1: "annoyed", 2: "angry", 3: "furious" },
            probabilities: Object.fromEntries(lp.map((x, j) => [String(j), x])),
            confidence: 0,
          },
        },
        usage: { input_tokens: 120, output_tokens: 3 },
        label_mass: { urgent: random(), team: random(), mood: random() },
      }),
    );
    let u = random();
    let c = 0;
    while (c < options.length - 1 && (u -= pr[c]!) > 0) c++;
    let v = random();
    let l = 0;
    while (l < 3 && (v -= lp[l]!) > 0) l++;
    gold.push(`T${i},${random() < p ? "yes" : "no"},${options[c]},${l}`);
  }
  // Under the working directory, as a user's out/ would be: the reports show these names relative, never a temporary path.
  const a = relative(process.cwd(), join(dir, `${name}.jsonl`));
  const g = relative(process.cwd(), join(dir, `${name}.gold.csv`));
  writeFileSync(a, `${answers.join("\n")}\n`);
  writeFileSync(g, `${gold.join("\n")}\n`);
  writeFileSync(
    `${a}.errors.jsonl`,
    `${JSON.stringify({ line: 9, source: "t.jsonl", id: "T9x", status: 0, type: "invalid_record", message: "line 9: invalid JSON" })}\n`,
  );
  // The run's usage summary and the calibration file it names: the header says model, calibration and when it was fitted.
  const calibration = join(dir, "calibration.json");
  writeFileSync(
    calibration,
    JSON.stringify({
      kind: "typed-eval.calibration",
      version: 1,
      identity: "tiny-1.0.0@sha256:5e1f",
      model: "tiny-1.0.0",
      created: "2026-11-20T08:00:00.000Z",
      fitted_on: { answers: "out/report-fixtures/october.jsonl", gold: "out/report-fixtures/october.gold.csv" },
      questions: {},
    }),
  );
  writeFileSync(
    `${a}.usage.json`,
    JSON.stringify({
      kind: "typed-eval.usage",
      model: "tiny-1.0.0",
      model_identity: "tiny-1.0.0@sha256:5e1f",
      price_per_million_input_tokens: 0,
      records: { read: n + 1, answered: n, failed: 1, deduplicated: 0, resumed: 0, other_shards: 0 },
      requests: { sent: n, retries: 0, rate_limited: 0, overloaded: 0 },
      tokens: { input: n * 120, output: n * 3, wasted_input: 0 },
      cost_usd: 0,
      seconds: 12,
      records_per_second: n / 12,
      tokens_per_second: 0,
      calibration: {
        source: relative(process.cwd(), calibration),
        questions: {
          urgent: { method: "platt", temperature: 1.21, bias: [0, 0.1], moved: 0.01 },
          team: { method: "temperature", temperature: 1.935, bias: [0, 0, 0, 0, 0], moved: 0.02 },
        },
      },
      this_run: { started: "2026-11-23T02:00:00.000Z" },
    }),
  );
  return { answers: a, gold: g };
}

beforeAll(async () => {
  process.chdir(WORK);
  dir = join(WORK, "out/report-fixtures");
  mkdirSync(dir, { recursive: true });
  mkdirSync(SHOTS, { recursive: true });
  if (hasChromium) browser = await launch();
}, 60_000);

afterAll(async () => {
  process.chdir(startedIn);
  await browser?.close();
});

/** Runs in the page (a string: the tests compile without the DOM's types): pairs of texts in one chart whose boxes overlap. */
const CLASHES = `(() => {
  const out = [];
  for (const svg of document.querySelectorAll("figure.chart svg")) {
    const boxes = [...svg.querySelectorAll("text")].map((t) => ({ r: t.getBoundingClientRect(), text: t.textContent }));
    for (let a = 0; a < boxes.length; a++)
      for (let b = a + 1; b < boxes.length; b++) {
        const p = boxes[a].r, q = boxes[b].r;
        const dx = Math.min(p.right, q.right) - Math.max(p.left, q.left);
        const dy = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
        if (dx > 0.5 && dy > 0.5) out.push(svg.closest("figure").dataset.chart + ': "' + boxes[a].text + '" / "' + boxes[b].text + '"');
      }
  }
  return out;
})()`;
const SPILLING = `[...document.querySelectorAll(".card")].filter((c) => c.scrollWidth > c.clientWidth + 1).map((c) => c.textContent.slice(0, 60))`;
const CHART_TEXTS = `[...document.querySelectorAll("figure.chart svg text")].map((t) => t.textContent)`;

/**
 * Opens a report file at each width: no request but the file, no console
 * error, every chart visible and within the viewport, nothing wider than the
 * page, no two texts of a chart overlapping, and every name in `labels`
 * whole in some chart text. Saves a full-page screenshot per width.
 */
async function check(html: string, name: string, expectedCharts: number, labels: string[]): Promise<void> {
  const path = join(dir, `${name}.html`);
  writeFileSync(path, html);
  for (const width of WIDTHS) {
    const page = await browser!.newPage({ viewport: { width, height: 900 } });
    const requests: string[] = [];
    const errors: string[] = [];
    page.on("request", (r) => requests.push(r.url()));
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    page.on("pageerror", (e) => errors.push(e.message));
    const url = pathToFileURL(path).href;
    await page.goto(url, { waitUntil: "load" });
    // First, so a failing layout can be looked at.
    await page.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
    expect(requests).toEqual([url]);
    expect(errors).toEqual([]);
    // Nothing scrolls sideways, and no card's content spills out of it.
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(width);
    expect(await page.evaluate<string[]>(SPILLING)).toEqual([]);
    const charts = page.locator("figure.chart svg");
    expect(await charts.count()).toBe(expectedCharts);
    for (let i = 0; i < expectedCharts; i++) {
      const box = await charts.nth(i).boundingBox();
      expect(box!.x).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width).toBeLessThanOrEqual(width);
      expect(box!.width).toBeGreaterThan(250);
      expect(box!.height).toBeGreaterThan(80);
      expect(await charts.nth(i).locator("rect, polyline").count()).toBeGreaterThan(0);
    }
    // Every text of a chart in its own place: glyph boxes (rotated texts included) never overlap.
    const clashes = await page.evaluate<string[]>(CLASHES);
    expect(clashes).toEqual([]);
    const texts = await page.evaluate<string[]>(CHART_TEXTS);
    for (const label of labels) expect(texts, `"${label}" whole in a chart`).toContain(label);
    expect(texts.some((t) => t.includes("…"))).toBe(false);
    // The numbers are text too: each chart has a table of them.
    expect(await page.locator("figure.chart details table").count()).toBe(expectedCharts);
    // No temporary path anywhere on the page.
    expect(await page.evaluate<string>("document.body.innerText")).not.toMatch(/\/tmp\//);
    await page.close();
  }
  if (process.env["UPDATE_DOCS_IMG"]) copyFileSync(join(SHOTS, `${name}-1280.png`), join(ROOT, "docs/img", `${name}.png`));
}

describe.skipIf(!hasChromium)("HTML reports in Chromium", () => {
  it("the assessment report: reliability, coverage, confusion and shares for each question", async () => {
    const { answers, gold } = writeFixtures(600, 1, "answers");
    const a = await assess(answers, gold, { bootstrap: 50 });
    // Per question: reliability, coverage, confusion, shares, accuracy by label mass.
    await check(assessmentHtml(a), "assessment", a.questions.length * 5, [...options, "0: calm", "3: furious", "no", "yes"]);
  }, 90_000);

  it("the run report with a comparison: shares, histograms, label mass, errors and shift", async () => {
    const earlier = writeFixtures(600, 1, "last-night");
    const now = writeFixtures(600, 2, "tonight", 1.5);
    const r = await runReport(now.answers, { compare: earlier.answers });
    expect(r.errors?.total).toBe(1);
    // Per question: shares (earlier and now), confidence, label mass; noul and score add a value histogram.
    await check(reportHtml(r), "run-report", 3 * 3 + 2, [...options, "0: calm", "3: furious"]);
  }, 90_000);
});
