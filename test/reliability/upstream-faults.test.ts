/**
 * The runner against an upstream that misbehaves in every way we know of:
 * 429 storms, 529, 500-503, resets, stalls past the timeout, truncated and
 * malformed JSON, and answers that break the spec. Every record must end
 * answered (from a valid answer only) or in the errors file with a reason.
 *
 * SOAK=1 runs a larger input with a higher fault rate.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Answer, SystemOneRequest } from "../../src/api/schema.js";
import type { UsageSummary } from "../../src/records/usage.js";
import { plausibleAnswers } from "../support/answers.js";
import { runCli } from "../support/cli.js";
import { sendJson, startUpstream, type Upstream } from "../support/upstream.js";

const SOAK = process.env["SOAK"] === "1";
const RECORDS = SOAK ? 2000 : 120;
const FAULT_RATE = SOAK ? 0.4 : 0.3;

/** Every way an answer can go wrong; each is one attempt's fate. */
const FAULTS = [
  "429",
  "529",
  "500",
  "502",
  "503",
  "reset",
  "stall",
  "cut-body", // the connection drops halfway through the body
  "truncated-json", // a complete HTTP response whose JSON stops halfway
  "not-json",
  "missing-answer",
  "wrong-type",
  "out-of-range",
  "unknown-option",
  "extra-answer",
  "no-usage",
] as const;
type Fault = (typeof FAULTS)[number];

/** The yes/no probability a record's valid answer carries: its own, so a row can be traced to the answer it came from. */
const nouls = (state: string) => (createHash("sha256").update(state).digest().readUInt16BE(0) % 997) / 1000;

/** A deterministic generator, so a failure can be replayed. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

let dir: string;
let url: string;
const stats = { requests: 0, valid: 0, faults: new Map<Fault | "storm", number>() };
const stalled: ServerResponse[] = [];
let stormUntil = 0;
let upstream: Upstream;
const random = rng(20261121);

function answer(req: IncomingMessage, res: ServerResponse, body: SystemOneRequest): void {
  stats.requests++;
  const state = String(body.state);
  // Poison records fail the same way on every attempt; the rest fail at random.
  const poison = /^poison-([a-z0-9-]+) /.exec(state)?.[1] as Fault | undefined;
  let fault: Fault | "storm" | undefined = poison ?? (random() < FAULT_RATE ? FAULTS[Math.floor(random() * FAULTS.length)] : undefined);
  // A storm: for a while every request is refused with 429.
  if (!poison && Date.now() < stormUntil) fault = "storm";
  else if (!poison && stats.requests === Math.floor(RECORDS / 3)) {
    stormUntil = Date.now() + 700;
    fault = "storm";
  }
  if (fault) stats.faults.set(fault, (stats.faults.get(fault) ?? 0) + 1);
  const valid = { model: "faulty-1.0.0", answers: plausibleAnswers(body.questions, nouls(state)), usage: { input_tokens: 50, output_tokens: 2 } };
  const json = (status: number, payload: unknown, headers: Record<string, string> = {}) => sendJson(res, status, payload, headers);
  const broken = (edit: (answers: Record<string, Record<string, unknown>>) => void) => {
    const answers = JSON.parse(JSON.stringify(valid.answers)) as Record<string, Record<string, unknown>>;
    edit(answers);
    json(200, { ...valid, answers });
  };
  switch (fault) {
    case undefined:
      stats.valid++;
      return json(200, valid);
    case "storm":
    case "429":
      return json(429, { detail: "rate limited", type: "rate_limited" }, { "retry-after-ms": "40" });
    case "529":
      return json(529, { detail: "overloaded", type: "overloaded" }, { "retry-after": "0" });
    case "500":
    case "502":
    case "503":
      return json(Number(fault), { detail: `upstream ${fault}`, type: "internal_error" });
    case "reset":
      return void req.socket.destroy();
    case "stall":
      stalled.push(res);
      return;
    case "cut-body": {
      const text = JSON.stringify(valid);
      res.writeHead(200, { "content-type": "application/json", "content-length": String(text.length) });
      res.write(text.slice(0, text.length >> 1));
      setTimeout(() => req.socket.destroy(), 5);
      return;
    }
    case "truncated-json":
      return json(200, JSON.stringify(valid).slice(0, 40));
    case "not-json":
      return json(200, "<html><body>502 Bad Gateway</body></html>");
    case "missing-answer":
      return broken((a) => delete a["pick"]);
    case "wrong-type":
      return broken((a) => (a["ok"]!["noul"] = "0.5"));
    case "out-of-range":
      return broken((a) => (a["ok"]!["noul"] = 1.5));
    case "unknown-option":
      return broken((a) => (a["pick"]!["probabilities"] = { a: 0.5, zzz: 0.5 }));
    case "extra-answer":
      return broken((a) => (a["surprise"] = { type: "noul", noul: 0.5 }));
    case "no-usage":
      return json(200, { model: valid.model, answers: valid.answers });
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-faults-"));
  upstream = await startUpstream((req, res, text) => answer(req, res, JSON.parse(text) as SystemOneRequest));
  url = upstream.url;
});

afterAll(async () => {
  for (const res of stalled) res.destroy();
  await upstream?.close();
});

const POISON: Fault[] = ["stall", "reset", "cut-body", "truncated-json", "not-json", "missing-answer", "wrong-type", "unknown-option", "no-usage", "500"];
const REASON: Record<string, RegExp> = {
  stall: /no answer within 400 ms/,
  reset: /socket hang up|ECONNRESET/,
  "cut-body": /aborted|ECONNRESET|socket hang up|invalid response/,
  "truncated-json": /invalid response/,
  "not-json": /invalid response/,
  "missing-answer": /invalid response: answers\.pick: missing/,
  "wrong-type": /invalid response: .*answers\.ok/,
  "unknown-option": /invalid response: .*answers\.pick/,
  "no-usage": /invalid response: .*usage/,
  "500": /upstream 500/,
};

interface Row {
  id: string;
  answers: Record<string, Answer>;
}
interface ErrorRow {
  id: string;
  status: number;
  type: string;
  message: string;
}
const read = <T>(path: string): T[] =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as T);

describe("runner against a faulty upstream", () => {
  it(`ends each of ${RECORDS} records answered from a valid answer, or in the errors file with the reason`, async () => {
    const states = new Map<string, string>();
    const lines = Array.from({ length: RECORDS }, (_, i) => {
      const poison = i % 10 === 5 ? POISON[((i / 10) % POISON.length) | 0] : undefined;
      const id = poison ? `p${i}-${poison}` : `r${i}`;
      const text = poison ? `poison-${poison} ${i}` : `record ${i}`;
      states.set(id, text);
      return JSON.stringify({ id, text });
    });
    const input = join(dir, "in.jsonl");
    writeFileSync(input, `${lines.join("\n")}\n`);
    const jobPath = join(dir, "job.json");
    writeFileSync(
      jobPath,
      JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" }, pick: { type: "choice", criteria: { a: null, b: null } } } }),
    );
    const out = join(dir, "out.jsonl");
    const started = Date.now();
    const r = await runCli(
      ["run", input, "--job", jobPath, "-o", out, "--base-url", url, "--timeout", "0.4", "--max-retries", "4", "--concurrency", "16", "--rpm", "12000"],
      {
        cwd: dir,
        env: { ...process.env, TYPED_EVAL_LOG_LEVEL: "warn", TYPED_EVAL_API_KEY: "k" },
      },
    );
    const seconds = (Date.now() - started) / 1000;
    expect(r.stderr).not.toMatch(/aborted|internal error/);
    expect(r.code).toBe(1);

    const answered = read<Row>(out);
    const failed = read<ErrorRow>(`${out}.errors.jsonl`);
    // Every record exactly once, in one file or the other.
    const ids = [...answered.map((a) => a.id), ...failed.map((f) => f.id)];
    expect(ids.length).toBe(RECORDS);
    expect(new Set(ids)).toEqual(new Set(states.keys()));
    // Answered only from the record's own valid answer: its yes/no probability is the one only a valid answer carries.
    for (const row of answered) {
      expect(row.id.startsWith("p")).toBe(false);
      expect(row.answers["ok"]).toEqual({ type: "noul", noul: nouls(states.get(row.id)!) });
      expect(Object.keys(row.answers).sort()).toEqual(["ok", "pick"]);
    }
    // Poison records fail with the reason; the others fail only after their retries ran out.
    for (const row of failed) {
      const poison = /^p\d+-(.+)$/.exec(row.id)?.[1];
      expect(row.message.length).toBeGreaterThan(10);
      if (poison) expect(row.message).toMatch(REASON[poison]!);
    }
    const poisoned = [...states.keys()].filter((id) => id.startsWith("p"));
    expect(failed.filter((f) => f.id.startsWith("p")).length).toBe(poisoned.length);
    const normalFailed = failed.length - poisoned.length;
    expect(normalFailed / (RECORDS - poisoned.length)).toBeLessThan(0.05);

    const summary = JSON.parse(readFileSync(`${out}.usage.json`, "utf8")) as UsageSummary;
    expect(summary.records).toMatchObject({ answered: answered.length, failed: failed.length });
    expect(summary.requests.rate_limited).toBeGreaterThan(0);
    expect(summary.requests.sent).toBe(stats.requests);
    console.log(
      JSON.stringify({
        figure: "upstream faults",
        records: RECORDS,
        seconds,
        requests: stats.requests,
        valid_answers: stats.valid,
        answered: answered.length,
        failed_poison: poisoned.length,
        failed_other: normalFailed,
        faults: Object.fromEntries(stats.faults),
      }),
    );
  }, 300_000);
});

describe("an endpoint that fails everything", () => {
  it("aborts resumably after --max-failures-in-a-row records, and a rerun against a healthy endpoint finishes", async () => {
    let healthy = false;
    const flaky = await startUpstream((_req, res, text) => {
      const body = JSON.parse(text) as SystemOneRequest;
      if (healthy) sendJson(res, 200, { model: "m-1", answers: plausibleAnswers(body.questions), usage: { input_tokens: 5, output_tokens: 1 } });
      else sendJson(res, 503, { detail: "down for maintenance" });
    });
    try {
      const base = flaky.url;
      const input = join(dir, "down.jsonl");
      writeFileSync(input, Array.from({ length: 200 }, (_, i) => JSON.stringify({ id: `d${i}`, text: `record ${i}` })).join("\n"));
      const jobPath = join(dir, "down.job.json");
      writeFileSync(jobPath, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
      const out = join(dir, "down.out.jsonl");
      // --rpm: the rerun's 200 records took 10 s at the default rate, which is not what this case tests.
      const args = [
        "run",
        input,
        "--job",
        jobPath,
        "-o",
        out,
        "--base-url",
        base,
        "--max-retries",
        "0",
        "--max-failures-in-a-row",
        "10",
        "--concurrency",
        "2",
        "--rpm",
        "1e6",
      ];
      const options = { cwd: dir, env: { ...process.env, TYPED_EVAL_LOG_LEVEL: "warn", TYPED_EVAL_API_KEY: "k" } };
      const down = await runCli(args, options);
      expect(down.code).toBe(3);
      expect(down.stderr).toMatch(/aborted: the endpoint failed 10 records in a row with nothing answered between them \(the last: .*down for maintenance\)/);
      expect(down.stderr).toMatch(/rerun the same command to resume/);
      healthy = true;
      const back = await runCli(args, options);
      expect(back.code).toBe(0);
      expect(read<Row>(out)).toHaveLength(200);
      expect(read<ErrorRow>(`${out}.errors.jsonl`)).toHaveLength(0);
    } finally {
      await flaky.close();
    }
  }, 120_000);
});
