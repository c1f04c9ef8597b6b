/**
 * No secret written anywhere (issue 36, item 1). A canary API key goes
 * through every failure path a remote run has: a wrong --base-url at a real
 * S3-compatible server (s3rver, which echoes the Authorization header in its
 * XML error), 401, 403, 4xx and 5xx bodies echoing the request's headers,
 * timeouts, with the S3 output and journal and with trace logging; then
 * every file written (journal, answers, errors, usage, --summary-json,
 * report, the S3 store's own files) and every stream (stdout, stderr) is
 * searched for the key and for every piece of it of 10 characters. Each run
 * is a real process: pino writes its lines to fd 2 itself.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { plausibleAnswers } from "../support/answers.js";
import { BIN } from "../support/cli.js";
import { startS3Store, type S3Store } from "../support/s3-proxy.js";
import { sendJson, startUpstream, type Upstream } from "../support/upstream.js";

/** A key no test data holds, fresh each run: 34 characters. */
const KEY = `te_CANARY_${randomBytes(12).toString("hex")}`;
/** Every form of the key that must not appear: the key, and each piece of it 10 characters long (prefixes, middles, suffixes). */
const FORMS = [KEY, ...Array.from({ length: KEY.length - 9 }, (_, i) => KEY.slice(i, i + 10))];

let dir: string;
let store: S3Store;
const streams: { what: string; text: string }[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-secrets-"));
  store = await startS3Store(join(dir, "s3-data"), ["labels"]);
}, 60_000);

afterAll(async () => {
  await store?.close();
});

/** Runs the CLI as a process with the canary key and trace logging; keeps both streams for the final search. */
function run(what: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: dir,
      env: { ...process.env, ...store.env, TYPED_EVAL_API_KEY: KEY, TYPED_EVAL_LOG_LEVEL: "trace", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    const deadline = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${what}: typed-eval ${args.join(" ")} did not end; it printed:\n${stderr.slice(-3000)}`));
    }, 40_000);
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("exit", (code) => {
      clearTimeout(deadline);
      streams.push({ what: `${what} stdout`, text: stdout }, { what: `${what} stderr`, text: stderr });
      resolve({ code, stdout, stderr });
    });
  });
}

const job = { state: "text", id: "id", model: "jev-latest", questions: { ok: { type: "noul" }, pick: { type: "choice", criteria: { a: null, b: null } } } };

/** A job and `n` records in a folder of their own, and the arguments of a run of them against `url` writing to `out` (or `output`). */
function setup(name: string, n: number): { jobPath: string; out: string; args: (url: string, more?: string[], output?: string) => string[] } {
  const at = join(dir, name);
  mkdirSync(at, { recursive: true });
  const input = join(at, "in.jsonl");
  writeFileSync(input, Array.from({ length: n }, (_, i) => JSON.stringify({ id: `r${i}`, text: `record ${i}` })).join("\n"));
  const jobPath = join(at, "job.json");
  writeFileSync(jobPath, JSON.stringify(job));
  const out = join(at, "out.jsonl");
  return { jobPath, out, args: (url, more = [], output = out) => ["run", input, "--job", jobPath, "-o", output, "--base-url", url, ...more] };
}

/** An upstream that echoes every request's headers (the Authorization header with them) in the error bodies `fail` picks. */
async function echoing(
  fail: (n: number, req: IncomingMessage, res: ServerResponse, body: SystemOneRequest) => boolean,
  models?: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<Upstream & { posts: () => number }> {
  let n = 0;
  const upstream = await startUpstream((req, res, text) => {
    const body = JSON.parse(text) as SystemOneRequest;
    if (fail(n++, req, res, body)) return;
    sendJson(res, 200, { model: "jev-1.2.3", answers: plausibleAnswers(body.questions), usage: { input_tokens: 50, output_tokens: 2 } });
  }, models);
  return { ...upstream, posts: () => n };
}

/** Every file under a folder, recursively. */
function filesUnder(root: string): string[] {
  return readdirSync(root).flatMap((name) => {
    const path = join(root, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

describe("a canary API key through every failure path", () => {
  it("a wrong --base-url at an S3-compatible store: exit 2 naming --base-url at the first contact, no request sent, the S3 output and journal clean", async () => {
    const { args } = setup("s3-wrong-url", 6);
    const direct = (store.server as unknown as { httpServer: { address(): { port: number } } }).httpServer.address().port;
    const summaryJson = join(dir, "s3-wrong-url", "summary.json");
    const r = await run("wrong url", args(`http://127.0.0.1:${direct}`, ["--summary-json", summaryJson], "s3://labels/night/answers.jsonl"));
    expect(r.code).toBe(2);
    // The store's own words, without the key: the message says what to fix.
    expect(r.stderr).toMatch(
      /answered HTTP 400 \(InvalidArgument Unsupported Authorization Type Authorization Bearer \[redacted\]\): that is not a System One API; check --base-url/,
    );
    const summary = JSON.parse(readFileSync(summaryJson, "utf8")) as { verdict: string; requests: { sent: number } };
    expect(summary).toMatchObject({ verdict: "bad-input", requests: { sent: 0 } });
  }, 60_000);

  it("401 and 403 echoing the headers: refused at the first contact (nothing billed) or at the one request sent alone", async () => {
    const refusing = await echoing(
      () => false,
      (req, res) => sendJson(res, 401, { detail: `invalid API key: ${req.headers.authorization}`, headers: req.headers }),
    );
    const forbidden = await echoing((_n, req, res) => {
      sendJson(res, 403, { detail: `this key may not use the model (${req.headers.authorization})`, echo: { headers: req.headers } });
      return true;
    });
    try {
      const a = setup("401", 19);
      const refused = await run("401", a.args(refusing.url, ["--summary-json", `${a.out}.summary.json`]));
      expect(refused.code).toBe(3);
      expect(refused.stderr).toMatch(/aborted: the endpoint refused the API key \(HTTP 401: invalid API key: Bearer \[redacted\]\)/);
      expect(refusing.posts()).toBe(0);
      // Nothing was finished, so nothing is said to be kept.
      expect(refused.stderr).not.toMatch(/Finished records are kept/);
      const b = setup("403", 19);
      const denied = await run("403", b.args(forbidden.url, ["--concurrency", "32"]));
      expect(denied.code).toBe(3);
      expect(denied.stderr).toMatch(/refused the API key \(HTTP 403/);
      // The first request goes alone: one is paid for, not the 19 a concurrency of 32 had in flight.
      expect(forbidden.posts()).toBe(1);
      expect(denied.stderr).not.toMatch(/Finished records are kept/);
    } finally {
      await refusing.close();
      await forbidden.close();
    }
  }, 60_000);

  it("4xx and 5xx bodies echoing the headers, retried and not, and timeouts; then the report of the answers beside them", async () => {
    const upstream = await echoing((n, req, res) => {
      const auth = String(req.headers.authorization);
      const kinds = [
        () => sendJson(res, 422, { detail: [{ loc: ["header", "authorization"], msg: `rejected ${auth}`, type: "value_error", input: auth }] }),
        () => sendJson(res, 400, { detail: `bad request from ${auth}`, headers: req.headers }),
        () => sendJson(res, 404, { detail: `model not found for ${auth}` }),
        () => sendJson(res, 500, { detail: `boom; request headers: ${JSON.stringify(req.headers)}` }),
        () => sendJson(res, 529, { detail: `overloaded (${auth})` }, { "retry-after-ms": "10" }),
        () => {
          res.writeHead(502, { "content-type": "text/plain" });
          res.end(`upstream connect error; authorization=${auth}; key=${auth.slice(7, 30)}`);
        },
        () => {
          res.writeHead(503, { "content-type": "text/html" });
          res.end(`<html><body><h1>503</h1><pre>${auth}</pre>${"x".repeat(200)}<p>${auth.slice(7)}</p></body></html>`);
        },
        // No answer: the attempt times out (--timeout 1s).
        () => undefined,
      ];
      // The first 12 attempts fail (each kind at least once; the retryable ones retried once); the rest answer.
      if (n >= 12) return false;
      (kinds[n % kinds.length] as () => void)();
      return true;
    });
    try {
      const { args, jobPath, out } = setup("4xx-5xx", 14);
      const more = ["--max-retries", "1", "--concurrency", "4", "--timeout", "1s", "--summary-json", `${out}.summary.json`];
      const r = await run("4xx/5xx/timeouts", args(upstream.url, more));
      expect([1, 5]).toContain(r.code);
      const errors = readFileSync(`${out}.errors.jsonl`, "utf8");
      // The errors say what the endpoint said, with the key taken out.
      expect(errors).toMatch(/\[redacted\]/);
      expect(errors).toMatch(/"status":422/);
      expect(errors).toMatch(/no answer within 1000 ms/);
      const answered = readFileSync(out, "utf8").split("\n").filter(Boolean).length;
      expect(answered).toBeGreaterThan(0);
      const report = await run("report", ["report", out, "--job", jobPath, "-o", join(dir, "4xx-5xx", "report.html"), "--json"]);
      expect(report.code).toBe(0);
    } finally {
      await upstream.close();
    }
  }, 90_000);

  it("an S3 output whose records all fail with the key in their text", async () => {
    const echo = await echoing((_n, req, res) => {
      sendJson(res, 500, { detail: `no (${req.headers.authorization})` });
      return true;
    });
    try {
      const s3 = await run("s3 output", setup("s3-out", 3).args(echo.url, ["--max-retries", "0"], "s3://labels/fails/answers.jsonl"));
      expect(s3.code).toBe(5);
    } finally {
      await echo.close();
    }
  }, 60_000);

  it("leaves the key in no file written and no stream", () => {
    // The S3 store's own files hold the objects and the journal the runs shipped.
    const files = filesUnder(dir);
    expect(files.some((f) => f.includes("s3-data"))).toBe(true);
    expect(files.some((f) => f.endsWith(".errors.jsonl"))).toBe(true);
    expect(files.some((f) => f.endsWith("report.html"))).toBe(true);
    expect(streams.length).toBeGreaterThanOrEqual(12);
    const found: string[] = [];
    for (const file of files) {
      const text = readFileSync(file).toString("latin1");
      for (const form of FORMS) if (text.includes(form)) found.push(`${file}: ${form}`);
    }
    for (const { what, text } of streams) for (const form of FORMS) if (text.includes(form)) found.push(`${what}: ${form}`);
    expect(found).toEqual([]);
    // The canary was really sent and really echoed: the redaction stands where the key was, in the streams, the local
    // journals and errors files, and the objects shipped to S3 (the errors and the journal's segments).
    expect(streams.filter((s) => s.text.includes("[redacted]")).length).toBeGreaterThanOrEqual(3);
    const redacted = files.filter((f) => readFileSync(f, "utf8").includes("[redacted]"));
    expect(redacted.some((f) => f.endsWith("out.jsonl.journal"))).toBe(true);
    expect(redacted.some((f) => f.endsWith("out.jsonl.errors.jsonl"))).toBe(true);
    expect(redacted.filter((f) => f.includes("s3-data")).length).toBeGreaterThanOrEqual(2);
  });
});
