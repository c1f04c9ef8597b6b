/**
 * The format recipe, proved: TSV is one module (`src/records/tsv.ts`) and one
 * entry in the registry (`src/records/formats.ts`), and with nothing else
 * changed it is read and written wherever a data file is: run's input and
 * answers (gzipped too) and review file, stdout, assess's answers and gold,
 * report. A file name no format has is refused before anything is paid,
 * by every command that writes a data file, with the list of those that are.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { readAnswers } from "../../src/quality/answers.js";
import { FORMATS, formatList, outputFormat } from "../../src/records/formats.js";
import { runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";

const ROOT = resolve(import.meta.dirname, "../..");

const dir = mkdtempSync(join(tmpdir(), "te-formats-"));
const env = { TYPED_EVAL_LOG_LEVEL: "warn", TYPED_EVAL_THREADS: "1", TYPED_EVAL_MODEL_PATH: generatedModel(TINY) };
const cli = (...args: string[]) => runInProcess(args, env, { cwd: dir });
const jobFile = join(dir, "job.json");
writeFileSync(
  jobFile,
  JSON.stringify({
    state: "body",
    id: "ticket_id",
    keep: ["tier"],
    questions: { urgent: { type: "noul", instructions: "Is it urgent?" }, team: { type: "choice", criteria: { shipping: null, billing: null } } },
  }),
);
// A flat input, as a TSV: one body holds a tab, a quote and a line break, which must survive the round trip.
const bodies = ["my parcel is late", 'charged "twice"\tthis month\nplease refund', "where is my order", "the app crashes", "refund please", "late again"];
const tsvCell = (text: string) => (/[\t"\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text);
const input = join(dir, "tickets.tsv");
writeFileSync(input, `ticket_id\ttier\tbody\n${bodies.map((b, i) => `T${i}\t${i % 2 ? "free" : "gold"}\t${tsvCell(b)}`).join("\n")}\n`);
const journal = join(dir, "run.journal");
const run = (...args: string[]) => cli("run", input, "--job", jobFile, "--journal", journal, ...args);

/** Every answers row of a file, as the quality tools read it: id, kept tier, each question's distribution. */
async function answersOf(path: string): Promise<unknown[]> {
  const rows = [];
  for await (const row of await readAnswers(path, {})) rows.push({ id: row.id, tier: row.record?.["tier"], dist: Object.fromEntries(row.dist) });
  return rows;
}

describe("a format is one module and one registry entry", () => {
  it("TSV is named by two files of code, its module and the registry, and this test", () => {
    const skip = new Set(["node_modules", ".git", "dist", "models", "out", ".cache", ".typed-eval"]);
    const files = (at: string): string[] =>
      readdirSync(at, { withFileTypes: true }).flatMap((e) =>
        skip.has(e.name) ? [] : e.isDirectory() ? files(join(at, e.name)) : /\.(ts|js)$/.test(e.name) ? [join(at, e.name)] : [],
      );
    // A file names the format when it says TSV, quotes its name or imports its module.
    const naming = files(ROOT)
      .filter((f) => /\bTSV\b|"tsv"|\/tsv\.js"/.test(readFileSync(f, "utf8")))
      .map((f) => relative(ROOT, f))
      .sort();
    expect(naming).toEqual(["src/records/formats.ts", "src/records/tsv.ts", "test/records/formats.test.ts"]);
  });

  it("lists every format's extensions in its refusals, and takes .gz only for those that stream it", () => {
    for (const format of FORMATS) for (const extension of format.extensions) expect(formatList()).toContain(extension);
    expect(outputFormat("a/b.TSV.gz")).toMatchObject({ format: { name: "tsv" }, gzip: true });
    expect(() => outputFormat("b.parquet.gz")).toThrow(/Parquet is not gzipped .*name it b\.parquet$/);
    expect(() => outputFormat("b.xlsx", { what: "the answers" })).toThrow(/^cannot write the answers b\.xlsx: no format has its extension; name it \.jsonl/);
    expect(outputFormat("-")).toMatchObject({ format: { name: "jsonl" }, gzip: false });
    // A flag names the format of a name without a format's extension; a .gz name still means gzip.
    expect(outputFormat("night.gz", { explicit: "csv" })).toMatchObject({ format: { name: "csv" }, gzip: true });
    expect(outputFormat("night.TAB", { explicit: "tsv" })).toMatchObject({ format: { name: "tsv" }, gzip: false });
    expect(() => outputFormat("night.tab", { explicit: "csv", flag: "--output-format", what: "the answers" })).toThrow(
      /^cannot write the answers night\.tab: --output-format csv writes CSV, but the name says TSV; name it night\.csv, or leave out --output-format$/,
    );
    expect(() => outputFormat("night.gz", { explicit: "parquet" })).toThrow(/Parquet is not gzipped/);
    expect(() => outputFormat("night", { explicit: "xlsx", flag: "--output-format" })).toThrow(
      /^--output-format xlsx: no such format; the formats are jsonl, csv, tsv, parquet$/,
    );
  });
});

describe("TSV end to end", () => {
  it("run reads a TSV input and writes TSV answers, gzipped TSV and a TSV review file that hold what the CSV answers hold", async () => {
    const tsv = join(dir, "out.tsv");
    const r = await run("-o", tsv, "--review-below", "0.99");
    expect(r.code, r.stderr).toBe(0);
    const text = readFileSync(tsv, "utf8");
    const header = (text.split("\n")[0] as string).split("\t");
    expect(header.slice(0, 5)).toEqual(["id", "line", "source", "model", "tier"]);
    expect(header).toContain("team.choice");
    expect(text.split("\n").filter((l) => l !== "")).toHaveLength(bodies.length + 1);
    // The review file takes the answers' format.
    expect(readFileSync(`${tsv}.review.tsv`, "utf8").split("\n")[0]).toMatch(/^id\tline\tsource\tmodel\treview_reason\taudit\t/);

    // The same journal: no question asked again, the same rows in other formats.
    const csv = join(dir, "out.csv");
    const gz = join(dir, "out.tsv.gz");
    expect((await run("-o", csv)).code).toBe(0);
    expect((await run("-o", gz)).code).toBe(0);
    expect(gunzipSync(readFileSync(gz)).toString("utf8")).toBe(text);
    const fromCsv = await answersOf(csv);
    expect(fromCsv).toHaveLength(bodies.length);
    expect(await answersOf(tsv)).toEqual(fromCsv);
    expect(await answersOf(gz)).toEqual(fromCsv);

    // Stdout takes its format from the flag.
    const out = await run("-o", "-", "--output-format", "tsv");
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toBe(text);
  });

  it("assess reads TSV answers and TSV gold, and report TSV answers, with the numbers of CSV's", async () => {
    const gold = join(dir, "gold.tsv");
    writeFileSync(gold, `ticket_id\turgent\tteam\n${bodies.map((_, i) => `T${i}\t${i % 2 ? "yes" : "no"}\t${i % 3 ? "shipping" : "billing"}`).join("\n")}\n`);
    const assess = async (answers: string) => {
      const r = await cli("assess", answers, "--gold", gold, "--job", jobFile, "--json", "--bootstrap", "10");
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { questions: { name: string; n: number }[] };
    };
    const fromTsv = await assess("out.tsv");
    expect(fromTsv.questions.map((q) => [q.name, q.n])).toEqual([
      ["urgent", bodies.length],
      ["team", bodies.length],
    ]);
    expect(fromTsv.questions).toEqual((await assess("out.csv")).questions);

    const report = async (answers: string) => {
      const r = await cli("report", answers, "--json", "-o", join(dir, "report.html"));
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { questions: unknown[] };
    };
    expect((await report("out.tsv.gz")).questions).toEqual((await report("out.csv")).questions);
  });
});

describe("an extension no format has", () => {
  it("is refused by run in its check stage, before the journal or any output exists (exit 2: the verdict line naming the formats, and what to do), as is a flag naming another format than the name", async () => {
    const cases: [name: string, why: string, format?: string][] = [
      ["out.xlsx", "no format has its extension; name it .jsonl, .ndjson (JSONL); .csv (CSV); .tsv, .tab (TSV); .parquet"],
      ["out", "no format has its extension"],
      ["out.parquet.gz", "Parquet is not gzipped (it compresses inside); name it out.parquet"],
      // A flag naming another format than the name does (issue 36): every reader would take the file for what its name says.
      ["out.jsonl", "--output-format parquet writes Parquet, but the name says JSONL; name it out.parquet, or leave out --output-format", "parquet"],
      ["out.ndjson.gz", "--output-format csv writes CSV, but the name says JSONL; name it out.csv.gz, or leave out --output-format", "csv"],
    ];
    for (const [name, why, format] of cases) {
      const r = await cli("run", input, "--job", jobFile, "-o", name, ...(format ? ["--output-format", format] : []));
      expect(r.code, name).toBe(2);
      const lines = r.stderr.trim().split("\n");
      expect(lines[0]).toMatch(new RegExp(`^typed-eval: stopped: bad input: cannot write the answers ${name.replaceAll(".", "\\.")}: `));
      expect(lines[0]).toContain(why);
      expect(lines.slice(1)).toEqual(["No output was written. Next: fix the invocation or the input and rerun. Exit 2."]);
      expect(existsSync(join(dir, `${name}.journal`))).toBe(false);
      expect(existsSync(join(dir, name))).toBe(false);
    }
    const summary = join(dir, "refused.summary.json");
    expect((await cli("run", input, "--job", jobFile, "-o", "out.xlsx", "--summary-json", summary)).stderr).toContain(
      "also gzipped (.gz), or pass --output-format",
    );
    // The scheduler's summary is written for this verdict as for any.
    expect(JSON.parse(readFileSync(summary, "utf8"))).toMatchObject({ verdict: "bad-input", output: "out.xlsx" });
    // Named by the flag, any name is written in that format.
    expect((await cli("run", input, "--job", jobFile, "--journal", journal, "-o", "named.out", "--output-format", "tsv")).code).toBe(0);
    expect(readFileSync(join(dir, "named.out"), "utf8")).toBe(readFileSync(join(dir, "out.tsv"), "utf8"));
  });

  it("is refused by assess --suspects and labelstudio import before they read anything", async () => {
    const suspects = await cli("assess", "absent.tsv", "--gold", "absent.tsv", "--suspects", "suspects.xlsx");
    expect(suspects.code).toBe(2);
    expect(suspects.stderr.trim()).toMatch(/^typed-eval: cannot write suspects suspects\.xlsx: no format has its extension; name it \.jsonl.*\.tsv/);
    const gold = await cli("labelstudio", "import", "absent.json", "--job", jobFile, "-o", "gold.xlsx");
    expect(gold.code).toBe(2);
    expect(gold.stderr.trim()).toMatch(/^typed-eval: cannot write gold gold\.xlsx: no format has its extension; name it \.jsonl.*\.parquet/);
  });
});
