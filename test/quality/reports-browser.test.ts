/**
 * The HTML reports in a real browser: each opens from a file URL with no
 * network request and no console error, every chart is there and visible,
 * and a screenshot is saved for a person to look at (out/screenshots/).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Browser } from "playwright-core";
import { assess } from "../../src/quality/assess.js";
import { assessmentHtml, reportHtml, runReport } from "../../src/quality/report.js";
import { seededRandom } from "../../src/quality/metrics.js";
import { CHROMIUM, hasChromium, launch } from "../support/browser.js";

const SHOTS = resolve(import.meta.dirname, "../../out/screenshots");
let dir: string;
let browser: Browser | undefined;

if (!hasChromium) {
  process.stderr.write(
    `\n*** SKIPPED the browser tests of the HTML reports: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH) ***\n\n`,
  );
}

const options = ["shipping", "billing", "product", "account", "other"];

/** Deterministic answers and gold for three questions, in the shape `run` writes. */
function writeFixtures(n: number, seed: number, skew = 0): { answers: string; gold: string } {
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
  const a = join(dir, `answers-${seed}.jsonl`);
  const g = join(dir, `gold-${seed}.csv`);
  writeFileSync(a, `${answers.join("\n")}\n`);
  writeFileSync(g, `${gold.join("\n")}\n`);
  writeFileSync(
    `${a}.errors.jsonl`,
    `${JSON.stringify({ line: 9, source: "t.jsonl", id: "T9x", status: 0, type: "invalid_record", message: "line 9: invalid JSON" })}\n`,
  );
  return { answers: a, gold: g };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-html-"));
  mkdirSync(SHOTS, { recursive: true });
  if (hasChromium) browser = await launch();
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

/** Opens a report file, fails on any request that is not the file itself and on console errors; returns the page's chart count. */
async function check(html: string, name: string, expectedCharts: number): Promise<void> {
  const path = join(dir, `${name}.html`);
  writeFileSync(path, html);
  const page = await browser!.newPage({ viewport: { width: 1366, height: 900 } });
  const requests: string[] = [];
  const errors: string[] = [];
  page.on("request", (r) => requests.push(r.url()));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  page.on("pageerror", (e) => errors.push(e.message));
  const url = pathToFileURL(path).href;
  await page.goto(url, { waitUntil: "load" });
  expect(requests).toEqual([url]);
  expect(errors).toEqual([]);
  const charts = page.locator("figure.chart svg");
  expect(await charts.count()).toBe(expectedCharts);
  for (let i = 0; i < expectedCharts; i++) {
    const chart = charts.nth(i);
    await chart.scrollIntoViewIfNeeded();
    expect(await chart.isVisible()).toBe(true);
    const box = await chart.boundingBox();
    expect(box!.width).toBeGreaterThan(200);
    expect(box!.height).toBeGreaterThan(150);
    // Each chart draws something: bars, cells or a line.
    expect(await chart.locator("rect, polyline").count()).toBeGreaterThan(0);
  }
  // The numbers are text too: each chart has a table of them.
  expect(await page.locator("figure.chart details table").count()).toBe(expectedCharts);
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  await page.close();
}

describe.skipIf(!hasChromium)("HTML reports in Chromium", () => {
  it("the assessment report: reliability, coverage, confusion and shares for each question", async () => {
    const { answers, gold } = writeFixtures(600, 1);
    const a = await assess(answers, gold, { bootstrap: 50 });
    await check(assessmentHtml(a), "assessment", a.questions.length * 4);
  }, 60_000);

  it("the run report with a comparison: shares, histograms, label mass, errors and shift", async () => {
    const earlier = writeFixtures(600, 1);
    const now = writeFixtures(600, 2, 1.5);
    const r = await runReport(now.answers, { compare: earlier.answers });
    expect(r.errors?.total).toBe(1);
    // Per question: shares, confidence, label mass; noul and score add a value histogram; plus one comparison chart each.
    await check(reportHtml(r), "run-report", 3 * 3 + 2 + 3);
  }, 60_000);
});
