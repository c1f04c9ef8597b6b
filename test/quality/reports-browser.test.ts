/**
 * The HTML pages in a real browser, at 1,280 and 1,920 px, in one browser
 * session: each opens from a file URL with no network request and no
 * console error; the verdict table is in the first screen; no text
 * overflows its box (HTML by scrollWidth against clientWidth, chart texts by
 * their boxes inside their chart), no two texts of a chart overlap, no card
 * has a blank half, every chart is drawn at the one page scale; every gate
 * breach is marked where its metric is shown; a rare class the model misses
 * is marked act. Screenshots land in $SCREENSHOTS (else a temporary folder:
 * tests write nothing into the checkout) as <name>-<width>.png (the
 * whole page) and <name>-<width>-top.png (the first screen), for a person to
 * look at.
 *
 * The docs' pictures are these screenshots at 1,280 px: regenerate them with
 *   UPDATE_DOCS_IMG=1 npx vitest run test/quality/reports-browser.test.ts
 * (copies the first screen of the assessment and run-report pages, and one
 * question's detail of each, to docs/img/), and look at them.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConditions } from "../../src/quality/gate.js";
import { CHART_SCALE } from "../../src/quality/html.js";
import { type Measured, measure } from "../../src/quality/measure.js";
import { anchorOf, qualityPage } from "../../src/quality/pages.js";
import { Suspects } from "../../src/quality/suspects.js";
import { CHROMIUM, hasChromium, launch } from "../support/browser.js";
import { FIVE_QUESTIONS, IDENTITY_FILE, IDENTITY_SHA, MODEL, TEN_QUESTIONS, writeRun } from "../support/label-sets.js";

const ROOT = resolve(import.meta.dirname, "../..");
// The fixtures live under the working directory, as a user's out/ would: a temporary one, entered for this file's tests.
const WORK = mkdtempSync(join(tmpdir(), "te-reports-browser-"));
const SHOTS = process.env["SCREENSHOTS"] ?? join(WORK, "out/screenshots");
const startedIn = process.cwd();
const WIDTHS = [1280, 1920];
const HEIGHT = 900;
let dir: string;
let browser: Browser | undefined;
const files: Record<string, string> = {};

if (!hasChromium) {
  process.stderr.write(
    `\n*** SKIPPED the browser tests of the HTML reports: no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH) ***\n\n`,
  );
}

beforeAll(async () => {
  // Under the working directory, as a user's out/ would be: the pages show these names relative, never a temporary path.
  process.chdir(WORK);
  dir = join(WORK, "out/report-fixtures");
  mkdirSync(dir, { recursive: true });
  mkdirSync(SHOTS, { recursive: true });
  const at = (name: string) => relative(process.cwd(), join(dir, name));
  files["tonight"] = at("tonight.jsonl");
  files["earlier"] = at("earlier.jsonl");
  files["ten"] = at("ten.jsonl");
  const tonight = writeRun(files["tonight"], {
    n: 1500,
    seed: 3,
    questions: FIVE_QUESTIONS,
    model: MODEL,
    identity: IDENTITY_FILE,
    failed: 2,
  });
  // The same records answered last night by other weights of the same name: sharper probabilities move the noul and score distributions.
  writeRun(files["earlier"], { n: 1500, seed: 3, questions: FIVE_QUESTIONS, model: MODEL, identity: IDENTITY_SHA, sharpness: 1.8 });
  files["gold"] = at("tonight.gold.csv");
  writeFileSync(files["gold"], tonight.gold);
  const ten = writeRun(files["ten"], { n: 400, seed: 5, questions: TEN_QUESTIONS, model: MODEL, identity: IDENTITY_FILE });
  files["tenGold"] = at("ten.gold.csv");
  writeFileSync(files["tenGold"], ten.gold);
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
/** HTML boxes whose content is wider than they are. */
const OVERFLOWING = `[...document.querySelectorAll(".card, td, th, .tile, dd, dt, p, h1, h2, h3, figcaption, li, summary, section")]
  .filter((e) => e.scrollWidth > e.clientWidth + 1)
  .map((e) => e.tagName + "." + e.className + ": " + e.textContent.slice(0, 60))`;
/** Chart texts that stand outside their chart, even in part (a cut label). */
const CUT = `[...document.querySelectorAll("figure.chart svg")].flatMap((svg) => {
  const s = svg.getBoundingClientRect();
  return [...svg.querySelectorAll("text")].filter((t) => {
    const r = t.getBoundingClientRect();
    return r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 1 || r.bottom > s.bottom + 1;
  }).map((t) => svg.closest("figure").dataset.chart + ": " + t.textContent);
})`;
/** Each chart's pixels per unit. */
const SCALES = `[...document.querySelectorAll("figure.chart svg")].map((svg) => svg.getBoundingClientRect().width / svg.viewBox.baseVal.width)`;
/** Cards with more than 8 px of blank under their content. */
const BLANK = `[...document.querySelectorAll(".card")].filter((card) => {
  const kids = [...card.children];
  if (kids.length === 0) return false;
  const bottom = Math.max(...kids.map((k) => k.getBoundingClientRect().bottom));
  const style = getComputedStyle(card);
  return card.getBoundingClientRect().bottom - parseFloat(style.paddingBottom) - parseFloat(style.borderBottomWidth) - bottom > 8;
}).map((c) => c.textContent.slice(0, 60))`;
const CHART_TEXTS = `[...document.querySelectorAll("figure.chart svg text")].map((t) => t.textContent)`;

/** A verdict cell as the page shows it: its mark class and text. */
function cellOf(question: string, column: number): string {
  return `(() => { const td = document.querySelector('tr[data-question="${question}"]').children[${column}]; return td.className + " " + td.textContent; })()`;
}

/** The detail band of a question: the text between its heading and the next. */
function bandText(question: string): string {
  return `(() => { let e = document.getElementById(${JSON.stringify(anchorOf(question))}); let t = ""; for (e = e.nextElementSibling; e && e.tagName !== "H2"; e = e.nextElementSibling) t += e.textContent + "\\n"; return t; })()`;
}

/**
 * Opens a page at each width and checks what every page must hold; `more`
 * runs the page's own checks. Saves a full-page and a first-screen screenshot.
 */
async function check(html: string, name: string, labels: string[], more: (page: import("playwright-core").Page) => Promise<void>): Promise<void> {
  const path = join(dir, `${name}.html`);
  writeFileSync(path, html);
  for (const width of WIDTHS) {
    const page = await browser!.newPage({ viewport: { width, height: HEIGHT } });
    const requests: string[] = [];
    const errors: string[] = [];
    page.on("request", (r) => requests.push(r.url()));
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    page.on("pageerror", (e) => errors.push(e.message));
    const url = pathToFileURL(path).href;
    await page.goto(url, { waitUntil: "load" });
    // First, so a failing layout can be looked at.
    await page.screenshot({ path: join(SHOTS, `${name}-${width}-top.png`) });
    await page.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
    expect(requests).toEqual([url]);
    expect(errors).toEqual([]);
    // The verdict, whole, in the first screen.
    const verdict = await page.locator("table.verdict").boundingBox();
    expect(verdict!.y + verdict!.height, `${name} at ${width}: the verdict table ends below the first screen`).toBeLessThanOrEqual(HEIGHT);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(width);
    expect(await page.evaluate<string[]>(OVERFLOWING), `${name} at ${width}: text wider than its box`).toEqual([]);
    expect(await page.evaluate<string[]>(CUT), `${name} at ${width}: chart text cut`).toEqual([]);
    expect(await page.evaluate<string[]>(CLASHES), `${name} at ${width}: chart texts overlap`).toEqual([]);
    expect(await page.evaluate<string[]>(BLANK), `${name} at ${width}: card with blank space`).toEqual([]);
    const scales = await page.evaluate<number[]>(SCALES);
    expect(scales.length).toBeGreaterThan(0);
    for (const s of scales) expect(s, `${name} at ${width}: one chart scale`).toBeCloseTo(CHART_SCALE, 3);
    const texts = await page.evaluate<string[]>(CHART_TEXTS);
    for (const label of labels) expect(texts, `"${label}" whole in a chart`).toContain(label);
    expect(texts.some((t) => t.includes("…"))).toBe(false);
    const body = await page.evaluate<string>("document.body.innerText");
    // Numbers for people: no NaN, no negative zero, no temporary path.
    expect(body).not.toMatch(/NaN|Infinity|-0\.0+\b|\/tmp\//);
    await more(page);
    await page.close();
  }
}

/** The docs' pictures (UPDATE_DOCS_IMG=1): a page's first screen at 1,280 px, and one question's detail. */
async function docsPictures(name: string, question: string): Promise<void> {
  const page = await browser!.newPage({ viewport: { width: 1280, height: HEIGHT } });
  await page.goto(pathToFileURL(join(dir, `${name}.html`)).href, { waitUntil: "load" });
  await page.locator(`#${anchorOf(question)} + .band`).screenshot({ path: join(SHOTS, `${name}-question-1280.png`) });
  await page.close();
  if (!process.env["UPDATE_DOCS_IMG"]) return;
  copyFileSync(join(SHOTS, `${name}-1280-top.png`), join(ROOT, "docs/img", `${name}.png`));
  copyFileSync(join(SHOTS, `${name}-question-1280.png`), join(ROOT, "docs/img", `${name}-question.png`));
}

/** Every breach of the gate is marked in its verdict cell and in its question's detail. */
async function breachesMarked(page: import("playwright-core").Page, m: Measured): Promise<void> {
  expect(m.gate!.breaches.length).toBeGreaterThan(0);
  for (const b of m.gate!.breaches) {
    const row = await page.evaluate<string>(`document.querySelector('tr[data-question="${b.question}"]').textContent`);
    expect(row, `${b.question}: ${b.condition} in its verdict row`).toContain(`✗ gate ${b.condition}`);
    expect(await page.evaluate<string>(bandText(b.question)), `${b.question}: ${b.condition} where it is shown`).toContain(`✗ gate ${b.condition}`);
  }
}

const OPTIONS = ["shipping", "billing", "product", "account access and login problems", "other"];

describe.skipIf(!hasChromium)("HTML pages in Chromium", () => {
  it("assess --html --compare: the verdict first, a missed rare class marked act, the model change named, every breach marked", async () => {
    const conditions = parseConditions('is_spam.recall["yes"]<0.5,team.js_distance>0.001,urgency.psi>0.2');
    const m = await measure({
      answers: files["tonight"]!,
      gold: files["gold"]!,
      compare: files["earlier"]!,
      conditions,
      bootstrap: 30,
      suspects: new Suspects(),
    });
    const spam = m.assessment!.questions.find((q) => q.name === "is_spam")!;
    // The model finds few spam rows while accuracy stays high: the rare class takes the headline and is marked act.
    expect(spam.headline).toBe("weakest_recall");
    expect(spam.metrics["accuracy"]).toBeGreaterThan(0.9);
    expect(spam.metrics["weakest_recall"]).toBeLessThan(0.3);
    expect(m.verdict.questions.find((q) => q.name === "is_spam")!.cells.weakest_class.mark).toBe("act");
    expect(m.verdict.model.changed).toBe(true);
    expect(m.verdict.sentence).toMatch(/^Not yet: act on is_spam \(.*weakest class.*\)/);
    const html = qualityPage({ title: `Assessment: ${files["tonight"]}`, verdict: m.verdict, assessment: m.assessment, report: m.report, gate: m.gate });
    await check(html, "assessment", [...OPTIONS, "0: whenever", "3: now", "no", "yes"], async (page) => {
      expect(await page.evaluate<string>(cellOf("is_spam", 6))).toMatch(
        /^m-act act ?yes \(rare, [0-9.]+%\): recall 0\.\d{3} \(95%: [^)]+\), \d+ of \d+; precision /,
      );
      expect(await page.locator("p.model.changed").textContent()).toMatch(
        /^The model changed: the earlier run was answered by .*sha256 67c4f157…, chatml, this one by .*local file qwen2\.5-0\.5b-instruct-q4_k_m\.gguf, 398 MB, chatml/,
      );
      await breachesMarked(page, m);
      // The rare class's recall is the first tile of its question, alone on its row.
      expect(await page.evaluate<string>(`document.querySelector("#${anchorOf("is_spam")} + .band .tile.headline .k").textContent`)).toBe(
        "recall of yes, the weakest class (rare)",
      );
    });
    await docsPictures("assessment", "is_spam");
  }, 120_000);

  it("report --compare: each distribution earlier against now, the model change, every drift breach marked", async () => {
    const conditions = parseConditions("psi>0.2,team.js_distance>=0,wants_refund.agreement<0.999");
    const m = await measure({ answers: files["tonight"]!, compare: files["earlier"]!, report: true, conditions });
    const html = qualityPage({ title: `Run report: ${files["tonight"]}`, verdict: m.verdict, report: m.report, gate: m.gate });
    // Per question: numbers, shares earlier and now, confidence, label mass; noul and score add their value earlier and now.
    await check(html, "run-report", [...OPTIONS, "0: whenever", "3: now"], async (page) => {
      await breachesMarked(page, m);
      for (const q of FIVE_QUESTIONS) {
        const charts = await page.evaluate<string[]>(`[...document.querySelectorAll("figure.chart")].map((f) => f.dataset.chart)`);
        expect(charts).toContain(`${q.name}: label shares, earlier and now`);
        if (q.type !== "choice") expect(charts).toContain(`${q.name}: ${q.type === "noul" ? "p(yes)" : "expected score"}, earlier and now`);
      }
      expect(await page.locator("p.model.changed").count()).toBe(1);
    });
    await docsPictures("run-report", "urgency");
  }, 120_000);

  it("nothing measured: the n/a badge, never a green ok; gold from the review queue named above the table, its cells look", async () => {
    // A night with no failed row and nothing to compare: only the answered cells have evidence (tonight's two failures would make it look).
    const bare = await measure({ answers: files["ten"]!, report: true });
    const html = qualityPage({ title: `Run report: ${files["ten"]}`, verdict: bare.verdict, report: bare.report });
    await check(html, "nothing-measured", ["account access and login problems", "electronics"], async (page) => {
      expect(await page.locator("p.sentence").getAttribute("class")).toBe("sentence m-na");
      expect(await page.locator("p.sentence .mark").textContent()).toBe("n/a");
      expect(await page.locator("p.sentence").textContent()).toMatch(
        /^n\/aCannot tell: nothing beyond the answered rows was measured\. Not measured: .*add --gold <labels>/,
      );
      // Every question's own badge is n/a too, though its answered cell is ok.
      for (const q of TEN_QUESTIONS) expect(await page.evaluate<string>(cellOf(q.name, 0))).toMatch(/^m-na n\/a/);
    });
    // The review queue: team's gold rows are those it was least sure of, plus a 2% audit sample.
    const answers = readFileSync(files["tonight"]!, "utf8").trim().split("\n");
    const gold = readFileSync(files["gold"]!, "utf8").trim().split("\n");
    const queue = gold.slice(1).filter((_, i) => {
      const team = (JSON.parse(answers[i]!) as { answers: { team: { probabilities: Record<string, number> } } }).answers.team;
      return Math.max(...Object.values(team.probabilities)) < 0.7 || i % 50 === 0;
    });
    files["queue"] = relative(process.cwd(), join(dir, "queue.gold.csv"));
    writeFileSync(files["queue"], `${[gold[0], ...queue].join("\n")}\n`);
    const m = await measure({ answers: files["tonight"]!, gold: files["queue"], bootstrap: 20 });
    const assessed = qualityPage({ title: `Assessment: ${files["tonight"]}`, verdict: m.verdict, assessment: m.assessment });
    await check(assessed, "review-queue", OPTIONS, async (page) => {
      expect(await page.locator("p.sample").textContent()).toMatch(/^The gold of team was chosen by confidence: its rows are less sure than the run's/);
      const sample = await page.locator("p.sample").boundingBox();
      expect(sample!.y + sample!.height).toBeLessThanOrEqual(HEIGHT);
      for (const column of [2, 3, 6])
        expect(await page.evaluate<string>(cellOf("team", column))).toMatch(/^m-look look.*on gold chosen by confidence \(less sure than the run\)$/);
    });
  }, 120_000);

  it("ten questions: the verdict stays in the first screen, each row linked to its detail", async () => {
    const m = await measure({ answers: files["ten"]!, gold: files["tenGold"]!, report: true, bootstrap: 20 });
    expect(m.verdict.questions).toHaveLength(10);
    const html = qualityPage({ title: `Run report: ${files["ten"]}`, verdict: m.verdict, report: m.report, assessment: m.assessment });
    await check(html, "ten-questions", ["account access and login problems", "electronics"], async (page) => {
      const links = await page.evaluate<string[]>(`[...document.querySelectorAll("table.verdict a")].map((a) => a.getAttribute("href"))`);
      expect(links).toEqual(TEN_QUESTIONS.map((q) => `#${anchorOf(q.name)}`));
      for (const href of links) expect(await page.locator(href).count()).toBe(1);
    });
  }, 120_000);
});
