/**
 * A corpus of hostile inputs through the CLI, on the tiny generated model:
 * each gets a clear error, nothing crashes, no good record is lost, and no
 * output is left looking complete when the run could not finish. In this
 * process (the CLI's parser and boundary) but for the inputs whose size is the
 * point (50 and 70 MB) and one missing input, run as real processes.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli, runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";

let dir: string;
let env: Record<string, string | undefined>;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "te-bad-"));
  env = { ...process.env, TYPED_EVAL_MODEL_PATH: generatedModel(TINY), TYPED_EVAL_LOG_LEVEL: "warn" };
  writeFileSync(join(dir, "job.json"), JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
});

const cli = (args: string[]) => runInProcess(args, { TYPED_EVAL_MODEL_PATH: env["TYPED_EVAL_MODEL_PATH"], TYPED_EVAL_LOG_LEVEL: "error" }, { cwd: dir });
const spawned = (args: string[]) => runCli(args, { cwd: dir, env });

const good = (i: number) => JSON.stringify({ id: `g${i}`, text: `record ${i}` });

interface ErrorRow {
  line: number;
  id: string;
  status: number;
  type: string;
  message: string;
}

const jsonl = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as ErrorRow);

/** Runs a JSONL input whose line 2 is hostile between good lines 1 and 3: the good ones are answered, the bad one is an error row. */
async function oneBadLine(
  name: string,
  bad: Buffer | string,
  run: (args: string[]) => Promise<{ code: number | null; stderr: string }> = cli,
): Promise<ErrorRow> {
  const input = join(dir, `${name}.jsonl`);
  writeFileSync(input, Buffer.concat([Buffer.from(`${good(1)}\n`), Buffer.from(bad), Buffer.from(`\n${good(3)}\n`)]));
  const out = join(dir, `${name}.out.jsonl`);
  const r = await run(["run", input, "--job", "job.json", "-o", out]);
  expect(r.stderr).not.toMatch(/internal error|RangeError|TypeError|at .*\.ts:\d+/);
  expect(r.code).toBe(1);
  expect(
    jsonl(out)
      .map((row) => row.id)
      .sort(),
  ).toEqual(["g1", "g3"]);
  const errors = jsonl(`${out}.errors.jsonl`);
  expect(errors).toHaveLength(1);
  expect(errors[0]!.line).toBe(2);
  return errors[0]!;
}

describe("hostile JSONL lines become error rows; the run goes on", () => {
  it("invalid UTF-8, with the byte where it breaks", async () => {
    const bad = Buffer.concat([Buffer.from('{"id": "x", "text": "caf'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const row = await oneBadLine("utf8", bad);
    expect(row.message).toMatch(/line 2: invalid UTF-8 at byte 24 of the line/);
  }, 60_000);

  it("a lone surrogate and an overlong encoding are invalid UTF-8 too", async () => {
    expect((await oneBadLine("surrogate", Buffer.from([0x7b, 0xed, 0xa0, 0x80, 0x7d]))).message).toMatch(/invalid UTF-8 at byte 1 /);
    expect((await oneBadLine("overlong", Buffer.from([0x7b, 0xc0, 0xaf, 0x7d]))).message).toMatch(/invalid UTF-8 at byte 1 /);
  }, 60_000);

  it("a 50 MB state: refused as over the request size, without tokenizing it", async () => {
    const started = Date.now();
    const row = await oneBadLine("huge", JSON.stringify({ id: "big", text: "word ".repeat(10 * 1024 * 1024) }), spawned);
    expect(row).toMatchObject({ id: "big", status: 413, type: "payload_too_large" });
    expect(row.message).toMatch(/the request would be 50\.0 MiB, over the 8\.0 MiB a request may be/);
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 60_000);

  it("a line longer than a record may be (70 MB, no newline): dropped as it streams", async () => {
    const row = await oneBadLine("endless", "x".repeat(70 * 1024 * 1024), spawned);
    expect(row.message).toMatch(/line 2: line is 70\.0 MiB, over the 64\.0 MiB a record may be/);
  }, 60_000);

  it("JSON nested 100,000 deep", async () => {
    const row = await oneBadLine("deep", `${"[".repeat(100_000)}${"]".repeat(100_000)}`);
    expect(row.message).toMatch(/nested deeper than 64 levels/);
  }, 60_000);

  it("a raw NUL byte inside a line is invalid JSON; an escaped one is a character like any other", async () => {
    const row = await oneBadLine("nul", Buffer.from('{"id": "n", "text": "a\u0000b"}'));
    expect(row.message).toMatch(/invalid JSON: Bad control character/);
    const input = join(dir, "nul-escaped.jsonl");
    writeFileSync(input, `${JSON.stringify({ id: "e", text: "a\u0000b" })}\n`);
    const r = await cli(["run", input, "--job", "job.json", "-o", join(dir, "nul-escaped.out.jsonl")]);
    expect(r.code).toBe(0);
  }, 60_000);

  it("a record without the state field, and a state of the wrong type", async () => {
    expect((await oneBadLine("nostate", JSON.stringify({ id: "s" }))).message).toMatch(/record has no state field "text"/);
    expect((await oneBadLine("nullstate", JSON.stringify({ id: "s", text: null }))).message).toMatch(/state field "text" is null/);
  }, 60_000);
});

describe("broken CSV records become error rows; the records around them are read", () => {
  async function csv(name: string, text: string) {
    const input = join(dir, name);
    writeFileSync(input, text);
    const out = join(dir, `${name}.out.jsonl`);
    const r = await cli(["run", input, "--job", "job.json", "-o", out]);
    return {
      r,
      ids: jsonl(out)
        .map((row) => row.id)
        .sort(),
      errors: existsSync(`${out}.errors.jsonl`) ? jsonl(`${out}.errors.jsonl`) : [],
    };
  }
  const rows = (from: number, n: number) => Array.from({ length: n }, (_, i) => `g${from + i},record ${from + i}`).join("\n");

  it("an unclosed quote: the records before it answered, the error row says where it starts and that it runs to the end", async () => {
    const { r, ids, errors } = await csv("quote.csv", `id,text\n${rows(0, 5)}\nq1,"never closed\n${rows(5, 5)}\n`);
    expect(r.code).toBe(1);
    expect(ids).toEqual(["g0", "g1", "g2", "g3", "g4"]);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.line).toBe(7);
    expect(errors[0]!.message).toMatch(/CSV error in the record at line 7 \(it runs to line 12, the end of the input\): Quote Not Closed/);
  }, 60_000);

  it("stray quotes inside fields are read as characters, as spreadsheets do", async () => {
    const { r, ids } = await csv("midquote.csv", `id,text\ng1,say "hi"\ng2,"quoted"tail\ng3,ok\n`);
    expect(r.code).toBe(0);
    expect(ids).toEqual(["g1", "g2", "g3"]);
  }, 60_000);

  it("a NUL byte and ragged rows: a short row lacks its fields, a long one is an error row (its cells would land under the wrong names)", async () => {
    const { r, ids, errors } = await csv("ragged.csv", `id,text\ng1,a\u0000b\ng2\ng3,c,extra\ng4,d,\n`);
    expect(r.code).toBe(1);
    // A trailing empty cell (a trailing delimiter) loses nothing: g4 is read.
    expect(ids).toEqual(["g1", "g4"]);
    expect(errors.map((e) => [e.line, e.message.replace(/^line \d+: /, "")])).toEqual([
      [3, 'record has no state field "text"'],
      [
        4,
        'CSV error in the record at line 4: 3 cells where the header names 2 (beyond them: "extra"); a comma inside a cell that is not quoted? quote that cell',
      ],
    ]);
  }, 60_000);
});

describe("inputs that cannot be read past some point: exit 2, no output, work kept", () => {
  async function stopped(name: string, content: Buffer | string, pattern: RegExp) {
    const input = join(dir, name);
    writeFileSync(input, content);
    const out = join(dir, `${name}.out.jsonl`);
    const r = await cli(["run", input, "--job", "job.json", "-o", out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(pattern);
    // Most fail at their first record, at the check stage (no journal opened, none named); a truncated gzip fails at its end.
    expect(r.stderr).toMatch(/No output was written\. (Finished records are kept in \S+\. )?Next: fix the invocation or the input and rerun\. Exit 2\./);
    expect(existsSync(out)).toBe(false);
    return { out, journal: `${out}.journal` };
  }

  it("CSV with invalid UTF-8", async () => {
    await stopped(
      "latin1.csv",
      Buffer.concat([Buffer.from("id,text\ng1,caf"), Buffer.from([0xe9]), Buffer.from("\n")]),
      /latin1\.csv: invalid UTF-8 near byte 14/,
    );
  }, 60_000);

  it("a truncated gzip file", async () => {
    // Read up to where it breaks: the records before are answered (at the tiny model's 0.05 s of CPU each, 20 of them,
    // not 200), kept in the journal, and no output is written.
    const zipped = gzipSync(Buffer.from(Array.from({ length: 20 }, (_, i) => good(i)).join("\n")));
    await stopped("cut.jsonl.gz", zipped.subarray(0, zipped.length - 20), /cut\.jsonl\.gz: not valid gzip: unexpected end of file/);
  }, 60_000);

  it("a Parquet file cut short, and a Parquet file under a JSONL name", async () => {
    const parquet = readFileSync(join(import.meta.dirname, "../../examples/data/tickets.parquet"));
    await stopped("cut.parquet", parquet.subarray(0, parquet.length - 100), /cut\.parquet is not a Parquet file that can be read/);
    await stopped("tickets.jsonl", parquet, /tickets\.jsonl is a Parquet file: name it \.parquet or pass --format parquet/);
  }, 60_000);
});

describe("inputs that are not there", () => {
  it("a missing file (exit 6, input absent), a directory (exit 2): before anything runs", async () => {
    const missing = await spawned(["run", "nope.jsonl", "--job", "job.json", "-o", "x.jsonl"]);
    expect(missing.code).toBe(6);
    expect(missing.stderr).toMatch(/cannot read input nope\.jsonl: ENOENT/);
    mkdirSync(join(dir, "adir"), { recursive: true });
    const directory = await cli(["run", "adir", "--job", "job.json", "-o", "x.jsonl"]);
    expect(directory.code).toBe(2);
    expect(directory.stderr).toMatch(/adir is not a file/);
    expect(existsSync(join(dir, "x.jsonl"))).toBe(false);
  }, 60_000);

  it("an empty file: exit 6 with empty outputs and a warning", async () => {
    writeFileSync(join(dir, "empty.jsonl"), "");
    const r = await cli(["run", "empty.jsonl", "--job", "job.json", "-o", "empty.out.jsonl"]);
    expect(r.code).toBe(6);
    expect(r.stderr).toMatch(/the input holds no records/);
    expect(readFileSync(join(dir, "empty.out.jsonl"), "utf8")).toBe("");
  }, 60_000);

  it("a job file with every mistake: all listed at once, exit 2, nothing read", async () => {
    writeFileSync(
      join(dir, "bad-job.json"),
      JSON.stringify({
        state: 5,
        id: [],
        keep: "x",
        extra: 1,
        questions: { a: { type: "nope" }, b: { type: "choice", criteria: {} }, c: { type: "score", criteria: "x" } },
      }),
    );
    const r = await cli(["run", "nope.jsonl", "--job", "bad-job.json", "-o", "x.jsonl"]);
    expect(r.code).toBe(2);
    for (const problem of [
      /state: Input should be a valid string/,
      /id: Input should be a valid string/,
      /keep: Input should be a valid list/,
      /questions\.a: Input tag 'nope'/,
      /questions\.b\.choice\.criteria/,
      /questions\.c\.score\.criteria/,
      /extra: unknown field/,
    ]) {
      expect(r.stderr).toMatch(problem);
    }
    writeFileSync(join(dir, "not-json.json"), "{nope");
    const syntax = await cli(["run", "nope.jsonl", "--job", "not-json.json", "-o", "x.jsonl"]);
    expect(syntax.code).toBe(2);
    expect(syntax.stderr).toMatch(/not-json\.json is not valid JSON/);
    const absent = await cli(["run", "nope.jsonl", "--job", "absent.json", "-o", "x.jsonl"]);
    expect(absent.code).toBe(2);
    expect(absent.stderr).toMatch(/absent\.json/);
  }, 60_000);
});
