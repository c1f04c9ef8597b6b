/**
 * The batch runner through the CLI, on the tiny generated model: in this
 * process (`runInProcess`, the same parser and boundary) where what is tested
 * is what a run computes; as a real process for one run end to end, stdin and
 * stdout, the logger's lines, and a kill -9.
 */
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { parse } from "csv-parse/sync";
import { beforeAll, describe, expect, it } from "vitest";
import type { SystemOneResponse } from "../../src/api/schema.js";
import type { UsageSummary } from "../../src/records/usage.js";
import { generatedModel, TINY } from "../support/models.js";
import { BIN, runInProcess } from "../support/cli.js";
import { whenFile } from "../support/watch.js";

let modelPath: string;
let dir: string;

beforeAll(() => {
  modelPath = generatedModel(TINY);
  dir = mkdtempSync(join(tmpdir(), "te-run-"));
});

function cli(args: string[], input?: string | Buffer, env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    input,
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, TYPED_EVAL_MODEL_PATH: modelPath, TYPED_EVAL_LOG_LEVEL: "warn", ...env },
    cwd: dir,
    maxBuffer: 64 * 1024 * 1024,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The same command line run in this process: its code, stdout and stderr (but not the logger's lines). */
async function run(args: string[], env: Record<string, string> = {}) {
  return runInProcess(args, { TYPED_EVAL_MODEL_PATH: modelPath, TYPED_EVAL_LOG_LEVEL: "error", ...env }, { cwd: dir });
}

function file(name: string, content: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

const job = {
  state: "ticket.body",
  id: "ticket_id",
  keep: ["tier"],
  questions: {
    urgent: { type: "noul", instructions: "Is it urgent?" },
    team: { type: "choice", criteria: { shipping: null, billing: null } },
    mood: { type: "score", criteria: ["calm", "angry"] },
  },
};
const jobPath = () => file("job.json", JSON.stringify(job));

function tickets(n: number, offset = 0): string[] {
  return Array.from({ length: n }, (_, i) =>
    JSON.stringify({ ticket_id: `T${i + offset}`, tier: i % 3 ? "free" : "gold", ticket: { body: `Ticket number ${i + offset}: my parcel is late.` } }),
  );
}

interface Row {
  id: string;
  line: number;
  model: string;
  answers: SystemOneResponse["answers"];
  usage: SystemOneResponse["usage"];
  fields?: Record<string, unknown>;
  dedup_of?: string;
  label_mass?: Record<string, number>;
}

const rows = (path: string): Row[] =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Row);
const usage = (path: string): UsageSummary => JSON.parse(readFileSync(`${path}.usage.json`, "utf8")) as UsageSummary;

describe("typed-eval run", () => {
  it("answers every JSONL record once, with usage totals equal to the per-row sums", () => {
    const input = file("t.jsonl", `${tickets(12).join("\n")}\n`);
    const out = join(dir, "t.out.jsonl");
    const r = cli(["run", input, "--job", jobPath(), "-o", out, "--price", "0.042"]);
    expect(r.code).toBe(0);
    const answers = rows(out);
    expect(answers.map((a) => a.id).sort()).toEqual(Array.from({ length: 12 }, (_, i) => `T${i}`).sort());
    expect(answers[0]).toMatchObject({ model: expect.stringMatching(/^typed-eval-test-byte-[0-9a-f]{8}-0\.0\.0$/), fields: { tier: expect.any(String) } });
    expect(Object.keys(answers[0]!.answers).sort()).toEqual(["mood", "team", "urgent"]);
    const summary = usage(out);
    expect(summary.records).toMatchObject({ read: 12, answered: 12, failed: 0, deduplicated: 0, resumed: 0 });
    expect(summary.tokens.input).toBe(answers.reduce((s, a) => s + a.usage.input_tokens, 0));
    expect(summary.tokens.output).toBe(answers.reduce((s, a) => s + a.usage.output_tokens, 0));
    expect(summary.requests.sent).toBe(12);
    expect(summary.cost_usd).toBeCloseTo((summary.tokens.input * 0.042) / 1e6, 12);
    expect(r.stderr).toMatch(/12 records: 12 answered/);
  });

  it("sends identical requests once and marks the copies with the original's id and label mass", async () => {
    const lines = [...tickets(3), ...tickets(3)].map((l, i) => l.replace(/"ticket_id":"T\d+"/, `"ticket_id":"D${i}"`));
    const out = join(dir, "dup.jsonl");
    expect((await run(["run", file("dup.in.jsonl", lines.join("\n")), "--job", jobPath(), "-o", out])).code).toBe(0);
    const summary = usage(out);
    expect(summary.requests.sent).toBe(3);
    expect(summary.records.deduplicated).toBe(3);
    const copies = rows(out).filter((r) => r.dedup_of !== undefined);
    expect(copies).toHaveLength(3);
    for (const copy of copies) {
      expect(copy.usage).toEqual({ input_tokens: 0, output_tokens: 0 });
      const original = rows(out).find((r) => r.id === copy.dedup_of);
      expect(original?.dedup_of).toBeUndefined();
      expect(copy.answers).toEqual(original?.answers);
      expect(copy.label_mass).toEqual(original?.label_mass);
      expect(Object.keys(copy.label_mass ?? {})).toHaveLength(3);
    }
  });

  it("turns bad records into error rows with their line numbers, goes on, and exits 1", async () => {
    const lines = [tickets(1)[0], "{not json", JSON.stringify({ ticket_id: "X", ticket: {} }), JSON.stringify({ ticket: { body: "no id" } }), tickets(1, 5)[0]];
    const out = join(dir, "bad.jsonl");
    const r = await run(["run", file("bad.in.jsonl", lines.join("\n")), "--job", jobPath(), "-o", out]);
    expect(r.code).toBe(1);
    expect(
      rows(out)
        .map((a) => a.id)
        .sort(),
    ).toEqual(["T0", "T5"]);
    const errors = rows(`${out}.errors.jsonl`) as unknown as { line: number; status: number; type: string; message: string }[];
    expect(errors.map((e) => e.line).sort()).toEqual([2, 3, 4]);
    expect(errors.find((e) => e.line === 2)!.message).toMatch(/invalid JSON/);
    expect(errors.find((e) => e.line === 3)!.message).toMatch(/no state field "ticket.body"/);
    expect(errors.find((e) => e.line === 4)!.message).toMatch(/no id field "ticket_id"/);
    expect(r.stderr).toMatch(/failed records: .*bad\.jsonl\.errors\.jsonl/);
  });

  it("reads CSV with a BOM, quoted JSON cells and ragged rows, and writes flattened CSV columns", async () => {
    const csv = '\uFEFFticket_id,tier,body,meta\nC1,gold,"Late parcel, again","{""a"": [1, 2]}"\nC2,free,"Refund me",{}\nC3,free\n';
    const csvJob = file("csv-job.json", JSON.stringify({ ...job, state: "body" }));
    const out = join(dir, "c.out.csv");
    const r = await run(["run", file("c.csv", csv), "--job", csvJob, "-o", out]);
    expect(r.code).toBe(1); // C3 has no body
    const table = parse(readFileSync(out, "utf8"), { columns: true }) as Record<string, string>[];
    expect(table.map((t) => t["id"]).sort()).toEqual(["C1", "C2"]);
    expect(Object.keys(table[0]!)).toEqual([
      "id",
      "line",
      "source",
      "model",
      "tier",
      "urgent.noul",
      "urgent.label_mass",
      "team.choice",
      "team.confidence",
      "team.p.shipping",
      "team.p.billing",
      "team.label_mass",
      "mood.score",
      "mood.level",
      "mood.confidence",
      "mood.p.0",
      "mood.p.1",
      "mood.label_mass",
      "input_tokens",
      "output_tokens",
      "dedup_of",
      "prompt_format",
    ]);
    const row = table[0]!;
    // The most likely level's text beside the expected score.
    const likely = Number(row["mood.p.1"]) > Number(row["mood.p.0"]) ? 1 : 0;
    expect(row["mood.level"]).toBe((job.questions.mood.criteria as string[])[likely]);
    expect(Number(row["team.p.shipping"]) + Number(row["team.p.billing"])).toBeCloseTo(1, 9);
    expect(["shipping", "billing"]).toContain(row["team.choice"]);
    const errors = rows(`${out}.errors.jsonl`) as unknown as { id: string; message: string }[];
    expect(errors).toMatchObject([{ id: "C3", message: expect.stringContaining('no state field "body"') }]);
  });

  it("reads gzip input", async () => {
    const gz = file("t.jsonl.gz", gzipSync(`${tickets(4).join("\n")}\n`));
    const out = join(dir, "gz.jsonl");
    expect((await run(["run", gz, "--job", jobPath(), "-o", out])).code).toBe(0);
    expect(rows(out)).toHaveLength(4);
  });

  it("runs gzip from stdin to stdout", () => {
    const piped = cli(["run", "-", "--job", jobPath()], gzipSync(tickets(3).join("\n")));
    expect(piped.code).toBe(0);
    const streamed = piped.stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Row);
    expect(streamed.map((s) => s.id).sort()).toEqual(["T0", "T1", "T2"]);
  });

  it("splits a job into shards whose union is the whole input, without overlap, and merges their usage", async () => {
    const input = file("s.jsonl", tickets(30).join("\n"));
    const ids: string[][] = [];
    const summaries: string[] = [];
    for (const shard of ["1/3", "2/3", "3/3"]) {
      const out = join(dir, `shard-${shard.replace("/", "of")}.jsonl`);
      expect((await run(["run", input, "--job", jobPath(), "-o", out, "--shard", shard])).code).toBe(0);
      ids.push(rows(out).map((r) => r.id));
      summaries.push(`${out}.usage.json`);
      expect(usage(out).records.other_shards).toBe(30 - rows(out).length);
    }
    const all = ids.flat();
    expect(new Set(all).size).toBe(all.length);
    expect(all.sort()).toEqual(Array.from({ length: 30 }, (_, i) => `T${i}`).sort());
    expect(ids.every((s) => s.length > 0)).toBe(true);
    const merged = await run(["usage", ...summaries, "--project", "1000000", "--json"]);
    expect(merged.code).toBe(0);
    const m = JSON.parse(merged.stdout) as { totals: UsageSummary; cost_per_1000_records: number; projection: { cost_usd: number } };
    expect(m.totals.records.answered).toBe(30);
    expect(m.projection.cost_usd).toBeCloseTo(m.cost_per_1000_records * 1000, 9);
  });

  it("estimates exactly the input tokens the run then uses", async () => {
    const input = file("e.jsonl", [...tickets(8), ...tickets(2)].join("\n"));
    const estimate = await run(["estimate", input, "--job", jobPath(), "--json"]);
    expect(estimate.code).toBe(0);
    const e = JSON.parse(estimate.stdout) as { requests: number; duplicates: number; inputTokens: number; exact: boolean };
    expect(e).toMatchObject({ requests: 8, duplicates: 2, exact: true });
    const out = join(dir, "e.out.jsonl");
    expect((await run(["run", input, "--job", jobPath(), "-o", out])).code).toBe(0);
    expect(usage(out).tokens.input).toBe(e.inputTokens);
    expect((await run(["run", input, "--job", jobPath(), "--dry-run"])).stdout).toMatch(/requests: +8 \(2 duplicates/);
  });

  it("exits 2 for a bad job file and 6 for a missing input, reading no record", async () => {
    const bad = await run(["run", "nope.jsonl", "--job", file("bad-job.json", '{"questions": {}}')]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/questions: Dictionary should have at least 1 item/);
    const missing = await run(["run", "nope.jsonl", "--job", jobPath()]);
    expect(missing.code).toBe(6);
    expect(missing.stderr).toMatch(/cannot read input nope\.jsonl/);
  });
});

describe("repeated ids", () => {
  it("keeps every row in input order, says so in the log and the summary, and assess accepts the output", async () => {
    const lines = tickets(5).map((l, i) => l.replace(/"ticket_id":"T\d+"/, `"ticket_id":"T${[0, 1, 0, 2, 1][i]}"`));
    const out = join(dir, "repeated.out.jsonl");
    const r = await run(["run", file("repeated.jsonl", `${lines.join("\n")}\n`), "--job", jobPath(), "-o", out]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/2 rows repeat an id an earlier row has, such as "T0" \(lines 1 and 3\), "T1" \(lines 2 and 5\)/);
    expect(rows(out).map((row) => `${row.id}@${row.line}`)).toEqual(["T0@1", "T1@2", "T0@3", "T2@4", "T1@5"]);
    expect(usage(out).duplicate_ids).toEqual({
      rows: 2,
      examples: [
        { id: "T0", first_line: 1, line: 3 },
        { id: "T1", first_line: 2, line: 5 },
      ],
    });
    const gold = file("repeated-gold.csv", "id,urgent\nT0,yes\nT1,no\nT2,yes\n");
    const assessed = await run(["assess", out, "--gold", gold, "--json"]);
    expect(assessed.stderr).toBe("");
    expect(assessed.code).toBe(0);
    expect(JSON.parse(assessed.stdout).rows).toMatchObject({ answers: 5, matched: 3, repeated_ids: 2 });
  });
});

describe("resume keys on the model's identity", () => {
  it("keeps answers for the same weights and answers again for other weights", async () => {
    const input = file("m.jsonl", `${tickets(6).join("\n")}\n`);
    const out = join(dir, "m.out.jsonl");
    expect((await run(["run", input, "--job", jobPath(), "-o", out])).code).toBe(0);
    expect(usage(out).records).toMatchObject({ answered: 6, resumed: 0 });
    // The same command again: everything comes from the journal.
    expect((await run(["run", input, "--job", jobPath(), "-o", out])).code).toBe(0);
    expect(usage(out).records).toMatchObject({ answered: 6, resumed: 6 });
    // The same bytes under another path are the same weights: kept.
    const copy = join(dir, "copied-weights.gguf");
    copyFileSync(modelPath, copy);
    expect((await run(["run", input, "--job", jobPath(), "-o", out, "--model-path", copy])).code).toBe(0);
    expect(usage(out).records).toMatchObject({ answered: 6, resumed: 6 });
    // Same model name, other weights: nothing may be kept.
    const other = generatedModel({ ...TINY, shape: { ...TINY.shape, seed: TINY.shape.seed + 1 } });
    const rerun = await run(["run", input, "--job", jobPath(), "-o", out, "--model-path", other]);
    expect(rerun.code).toBe(0);
    expect(usage(out).records).toMatchObject({ answered: 6, resumed: 0 });
    expect(rows(out)).toHaveLength(6);
  });
});

describe("model lineage with --model-path", () => {
  it("names a file's model from its metadata and hash, priced 0, and uses the registry's name only for the registry's bytes", async () => {
    const { sha256File } = await import("../../src/models/download.js");
    const input = file("lineage.jsonl", `${tickets(3).join("\n")}\n`);
    const out = join(dir, "lineage.out.jsonl");
    const logged = cli(["run", input, "--job", jobPath(), "-o", out], undefined, { TYPED_EVAL_LOG_LEVEL: "info" });
    expect(logged.code).toBe(0);
    const sha = await sha256File(modelPath);
    const id = `typed-eval-test-byte-${sha.slice(0, 8)}-0.0.0`;
    for (const row of rows(out)) expect(row.model).toBe(id);
    // One name everywhere: the log, the usage summary (with the alias asked for beside it) and the journal's answers.
    expect(logged.stderr).toContain(`backend for ${id}`);
    expect(logged.stderr).not.toMatch(/backend for qwen/);
    expect(usage(out)).toMatchObject({ model: id, requested_model: "default" });
    const journaled = readFileSync(`${out}.journal`, "utf8")
      .split("\n")
      .filter((l) => l.includes('"k":"answer"'));
    expect(journaled.map((l) => (JSON.parse(l) as { model: string }).model)).toEqual([id, id, id]);
    expect(usage(out)).toMatchObject({ price_per_million_input_tokens: 0, cost_usd: 0 });
    const priced = join(dir, "lineage-priced.jsonl");
    expect((await run(["run", input, "--job", jobPath(), "-o", priced, "--price", "2"])).code).toBe(0);
    expect(usage(priced).cost_usd).toBeGreaterThan(0);
    // A registry entry whose published hash is this file's: the file is that model, with its name and price.
    const registry = file(
      "registry.json",
      JSON.stringify({
        models: [
          {
            name: "tiny-known",
            aliases: [],
            version: "2.1.0",
            description: "the test model",
            release_date: "2026-01-01",
            engine: "llama",
            source: { uri: "hf://x/y/tiny.gguf", sha256: sha },
            context_size: 8192,
            temperature: 1,
            price_per_million_input_tokens: 5,
          },
        ],
      }),
    );
    const known = join(dir, "lineage-known.jsonl");
    const r = await run(["run", input, "--job", jobPath(), "-o", known, "--model", "tiny-known", "--models-file", registry]);
    expect(r.code).toBe(0);
    for (const row of rows(known)) expect(row.model).toBe("tiny-known-2.1.0");
    expect(usage(known)).toMatchObject({ model: "tiny-known-2.1.0", requested_model: "tiny-known" });
    expect(usage(known).price_per_million_input_tokens).toBe(5);
  }, 60_000);
});

describe("resume after kill -9", () => {
  it("loses nothing and writes every record exactly once", async () => {
    const n = 200;
    const input = file("k.jsonl", tickets(n).join("\n"));
    const out = join(dir, "k.out.jsonl");
    const args = [BIN, "run", input, "--job", jobPath(), "-o", out];
    const env = { ...process.env, TYPED_EVAL_MODEL_PATH: modelPath, TYPED_EVAL_LOG_LEVEL: "warn" };
    const child = spawn(process.execPath, args, { cwd: dir, env, stdio: "ignore" });
    // Kill it once a good share of records is journaled, and what the run spent so far (at the default 1,200 requests/min,
    // the 200 records take 10 s: the run cannot end first).
    const journal = `${out}.journal`;
    const when = await whenFile(journal, (text) => text.split("\n").length > 60 && text.includes('"k":"run"'), child);
    expect(when, "the run finished before it could be killed").toBe("ready");
    child.kill("SIGKILL");
    await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(undefined) : child.on("exit", resolve)));
    expect(existsSync(out)).toBe(false); // no output left looking complete
    const before = readFileSync(journal, "utf8")
      .split("\n")
      .filter((l) => l.includes('"k":"answer"')).length;
    // The rerun is not about pacing: at the default rate its 140-odd records would take 7 s.
    const rerun = await run(["run", input, "--job", jobPath(), "-o", out, "--rpm", "1e6"]);
    expect(rerun.code).toBe(0);
    const answers = rows(out);
    expect(answers).toHaveLength(n);
    expect(new Set(answers.map((a) => a.id)).size).toBe(n);
    const summary = usage(out);
    expect(summary.records.resumed).toBeGreaterThanOrEqual(before - 1);
    // Paid twice: at most the records in flight when killed (4 sequences, 8 in hand).
    expect(summary.requests.sent - n).toBeLessThanOrEqual(8);
    // The killed run's requests count in the output's totals (journaled as they happen, every 2 s),
    // and this run's figures are its own.
    expect(summary.this_run!.requests.sent).toBe(n - summary.records.resumed);
    expect(summary.requests.sent).toBeGreaterThan(summary.this_run!.requests.sent);
    expect(summary.requests.sent).toBeGreaterThanOrEqual(n - 60);
  }, 60_000);
});

describe("usage figures", () => {
  it("say what this run did apart from the output's totals, and a journal serves one input only", async () => {
    const a = file("u1.jsonl", `${tickets(5).join("\n")}\n`);
    const b = file("u2.jsonl", `${tickets(5, 100).join("\n")}\n`);
    const out = join(dir, "u.out.jsonl");
    expect((await run(["run", a, "--job", jobPath(), "-o", out])).code).toBe(0);
    const again = await run(["run", a, "--job", jobPath(), "-o", out]);
    expect(again.stderr).toMatch(/this run: 0 requests/);
    expect(again.stderr).toMatch(/all runs of this output: 5 requests/);
    expect(usage(out).this_run!.requests.sent).toBe(0);
    const other = await run(["run", b, "--job", jobPath(), "-o", out]);
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(/the journal .*u\.out\.jsonl\.journal holds the records of .*u1\.jsonl, not of .*u2\.jsonl/);
  });

  it("of two different stdin runs sharing one journal are each run's own", () => {
    // Two different stdin runs share the default stdin journal: each run's own figures are apart.
    cli(["run", "-", "--job", jobPath(), "-o", join(dir, "stdin.jsonl"), "--journal", join(dir, "stdin.journal")], tickets(5, 200).join("\n"));
    const second = cli(["run", "-", "--job", jobPath(), "-o", join(dir, "stdin.jsonl"), "--journal", join(dir, "stdin.journal")], tickets(5, 300).join("\n"));
    expect(second.code).toBe(0);
    const s = usage(join(dir, "stdin.jsonl"));
    expect(s.this_run!.requests.sent).toBe(5);
    expect(s.requests.sent).toBe(10);
  });
});

describe("changing the job's kept fields", () => {
  it("fills the new columns from the input on a rerun, asking the model nothing", async () => {
    const input = file("keep.jsonl", `${tickets(6).join("\n")}\n`);
    const out = join(dir, "keep.out.csv");
    expect((await run(["run", input, "--job", file("keep1.json", JSON.stringify({ ...job, keep: ["tier"] })), "-o", out])).code).toBe(0);
    const wider = file("keep2.json", JSON.stringify({ ...job, keep: ["tier", "ticket.body"] }));
    const rerun = await run(["run", input, "--job", wider, "-o", out]);
    expect(rerun.code).toBe(0);
    expect(rerun.stderr).toMatch(/this run: 0 requests/);
    const table = parse(readFileSync(out, "utf8"), { columns: true }) as Record<string, string>[];
    expect(table).toHaveLength(6);
    for (const row of table) expect(row["ticket.body"]).toBe(`Ticket number ${row["id"]!.slice(1)}: my parcel is late.`);
    // And back: a narrower keep drops the column.
    expect((await run(["run", input, "--job", file("keep3.json", JSON.stringify({ ...job, keep: [] })), "-o", out])).code).toBe(0);
    expect(Object.keys((parse(readFileSync(out, "utf8"), { columns: true }) as Record<string, string>[])[0]!)).not.toContain("tier");
  });
});

describe("quick iteration", () => {
  const trial = () => file("trial.jsonl", `${tickets(30).join("\n")}\n`);

  it("tries a job on the first N records, or a reproducible random N, and a full run resumes what the trial answered", async () => {
    const input = trial();
    const limited = join(dir, "trial-limit.jsonl");
    expect((await run(["run", input, "--job", jobPath(), "-o", limited, "--limit", "3"])).code).toBe(0);
    expect(rows(limited).map((r) => r.id)).toEqual(["T0", "T1", "T2"]);
    const sample = async (seed: string, name: string) => {
      const out = join(dir, name);
      expect((await run(["run", input, "--job", jobPath(), "-o", out, "--sample", "5", "--seed", seed])).code).toBe(0);
      return rows(out).map((r) => r.id);
    };
    const a = await sample("3", "s1.jsonl");
    expect(a).toHaveLength(5);
    expect(await sample("3", "s2.jsonl")).toEqual(a);
    expect(await sample("4", "s3.jsonl")).not.toEqual(a);
    // A full run afterwards resumes what the trial answered.
    const full = await run(["run", input, "--job", jobPath(), "-o", limited]);
    expect(full.stderr).toMatch(/3 from an earlier run/);
    expect((await run(["run", input, "--job", jobPath(), "--limit", "2", "--sample", "2"])).code).toBe(2);
  });

  it("prints the exact prompt of one record, from run and from ask on stdin", async () => {
    const input = trial();
    const prompt = await run(["run", input, "--job", jobPath(), "--print-prompt"]);
    expect(prompt.code).toBe(0);
    expect(prompt.stdout).toMatch(/^# line 1 of .*trial\.jsonl, id T0/);
    expect(prompt.stdout).toContain("Ticket number 0: my parcel is late.");
    expect(prompt.stdout).toContain("Question: Is it urgent?");
    expect(prompt.stdout).toMatch(/=== question "team".*labels A, B ===\nQuestion: Which option fits the data best\?\nOptions:\nA\) shipping\nB\) billing/);
    const asked = spawnSync(process.execPath, [BIN, "ask", "-q", jobPath(), "--print-prompt", "--text"], {
      input: "My parcel is late.",
      encoding: "utf8",
      env: { ...process.env, TYPED_EVAL_MODEL_PATH: modelPath },
    });
    expect(asked.status).toBe(0);
    expect(asked.stdout).toContain("<data>\nMy parcel is late.\n</data>");
  });
});
