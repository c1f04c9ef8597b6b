/**
 * Every command behind one boundary: operating-system and library errors
 * (a port in use, a folder without write permission, a directory where a
 * file goes, a file that is not GGUF, a refused host) end in one line and
 * exit 2, an error nobody anticipated in exit 70, never a stack. The
 * commands run in this process (`typedEval` plus the boundary's `endingOf`,
 * exactly what `main` does); one spawned process per case only where the
 * process itself is the point (its stderr, its exit code, stdin).
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvocationError } from "../../src/api/errors.js";
import { EXIT } from "../../src/api/exit-codes.js";
import { endingOf } from "../../src/cli/boundary.js";
import { LockLostError, StorageError } from "../../src/api/verdict.js";
import { quietThirdPartyNotices } from "../../src/cli/notices.js";
import { BIN, type CliResult, runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";
import { unprivileged } from "../support/unprivileged.js";

const dir = mkdtempSync(join(tmpdir(), "te-boundary-"));
// Readable by the unprivileged user the read-only cases run as (see `unprivileged`).
chmodSync(dir, 0o755);
const job = resolve("jobs/support-triage.json");
const answers = join(dir, "answers.jsonl");
writeFileSync(
  answers,
  Array.from({ length: 12 }, (_, i) => JSON.stringify({ id: `T-${i}`, answers: { wants_refund: { type: "noul", noul: (i % 5) / 5 + 0.1 } } })).join("\n"),
);
const gold = join(dir, "gold.csv");
writeFileSync(gold, `id,wants_refund\n${Array.from({ length: 12 }, (_, i) => `T-${i},${i % 2 ? "yes" : "no"}`).join("\n")}\n`);
const readOnly = join(dir, "read-only");
mkdirSync(readOnly, { mode: 0o555 });
chmodSync(readOnly, 0o555);
const aDirectory = join(dir, "a-directory");
mkdirSync(aDirectory);
const notGguf = join(dir, "weights.gguf");
writeFileSync(notGguf, "this is not a model\n");

type Result = CliResult;

const inProcess = (argv: string[]) => runInProcess(argv);

/** A loopback port nothing listens on (it was free a moment ago). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen({ host: "127.0.0.1", port: 0 }, done));
  const { port } = server.address() as { port: number };
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

/** One line on stderr, no stack frame, and the exit code. */
function expectOneLine(r: Result, code: number, pattern: RegExp): void {
  expect(r.stderr.trimEnd()).toMatch(pattern);
  expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(r.stderr).not.toMatch(/\n\s+at /);
  expect(r.code).toBe(code);
}

describe("the boundary's mapping", () => {
  it("usage errors exit 2; OS errors exit 2 with one line; anything else is a bug: exit 70", async () => {
    expect(endingOf(new InvocationError("--job is missing"))).toEqual({ code: EXIT.usage, text: "typed-eval: --job is missing" });
    let isDir: unknown;
    try {
      readFileSync(aDirectory);
    } catch (error) {
      isDir = error;
    }
    expect(endingOf(isDir).code).toBe(EXIT.usage);
    // A store that failed past its retries, and a lock taken over: resumable verdicts with their own codes.
    expect(endingOf(new StorageError("S3 answered 503 for 120 s", "s3://b/k"))).toEqual({ code: EXIT.storage, text: "typed-eval: S3 answered 503 for 120 s" });
    expect(endingOf(new LockLostError("another run took the journal over")).code).toBe(EXIT.lockLost);
    // fetch() wraps the socket's error; the boundary describes its cause.
    const port = await closedPort();
    const refused = await fetch(`http://127.0.0.1:${port}/`).catch((error: unknown) => error);
    expect(endingOf(refused)).toEqual({ code: EXIT.usage, text: `typed-eval: connection refused by 127.0.0.1:${port}: is the server running?` });
    let bug: unknown;
    try {
      (JSON.parse("null") as { field: { deeper: number } }).field.deeper;
    } catch (error) {
      bug = error;
    }
    const ending = endingOf(bug);
    expect(ending.code).toBe(EXIT.internal);
    expect(ending.text).toMatch(
      /^typed-eval: internal error \(a bug in typed-eval\): Cannot read properties of null \(reading 'field'\); rerun with TYPED_EVAL_LOG_LEVEL=debug for the stack$/,
    );
    expect(endingOf(new Error("first line\n  second line")).text).not.toContain("second line");
  });
});

describe("numeric flags given a word say what they take", () => {
  it.each([
    [["run", answers, "--job", job, "--concurrency", "lots"], /^typed-eval: --concurrency takes a whole number from 1 to 10000, not "lots"$/],
    [["serve", "--port", "eighty"], /^typed-eval: --port takes a whole number from 0 to 65535, not "eighty"$/],
    [["assess", answers, "--gold", gold, "--bootstrap", "many"], /--bootstrap takes a whole number from 0 to 100000, not "many"/],
    [["usage", answers, "--project", "1e"], /--project takes a number of at least 0, not "1e"/],
    [["ask", "-q", job, "--threads", "two"], /--threads takes a whole number from 1 to 1024, not "two"/],
    [["serve", "--port"], /Not enough arguments following: port/],
  ])("%j", async (argv, pattern) => {
    expectOneLine(await inProcess(argv), EXIT.usage, pattern);
  });

  it("numbers still parse: negative, exponent and hex forms reach the range check as numbers", async () => {
    expectOneLine(await inProcess(["usage", answers, "--project", "-3"]), EXIT.usage, /--project takes a number of at least 0, not -3$/);
    expectOneLine(await inProcess(["serve", "--port", "1e6"]), EXIT.usage, /--port takes a whole number from 0 to 65535, not 1000000$/);
  });
});

describe("outputs that cannot be written fail before any work, naming the flag", () => {
  it("report, assess --html and calibrate -o into a folder without write permission", async () => {
    const cases: [string[], RegExp][] = [
      [
        ["report", answers, "-o", join(readOnly, "r.html")],
        /^typed-eval: cannot write --output .*read-only\/r\.html: no permission to create files in .*read-only; choose another path$/,
      ],
      [["assess", answers, "--gold", gold, "--html", join(readOnly, "a.html")], /^typed-eval: cannot write --html .*a\.html: no permission to create files in/],
      [
        ["calibrate", answers, "--method", "batch", "-o", join(readOnly, "c.json")],
        /^typed-eval: cannot write --output .*c\.json: no permission to create files in/,
      ],
      [
        ["keys", "create", "--account", "ops", "--accounts-file", join(readOnly, "accounts.json")],
        /^typed-eval: cannot write --accounts-file .*: no permission/,
      ],
    ];
    for (const [argv, pattern] of cases) {
      const r = await unprivileged(() => inProcess(argv));
      expectOneLine(r, EXIT.usage, pattern);
      // Nothing was computed first: no result on stdout.
      expect(r.stdout).toBe("");
    }
    expect(readdirSync(readOnly)).toEqual([]);
  });

  it("report, calibrate and keys given a directory where their file goes", async () => {
    for (const argv of [
      ["report", answers, "-o", aDirectory],
      ["calibrate", answers, "--method", "batch", "-o", aDirectory],
      ["keys", "create", "--account", "ops", "--accounts-file", aDirectory],
    ]) {
      const r = await inProcess(argv);
      expectOneLine(r, EXIT.usage, /cannot write --(output|accounts-file) .*a-directory: it is a directory, not a file; choose another path$/);
      expect(r.stdout).toBe("");
    }
    expect(readdirSync(aDirectory)).toEqual([]);
  });

  it("the same commands write where they can (the checks leave no probe file behind)", async () => {
    const out = join(dir, "ok");
    const r = await inProcess(["calibrate", answers, "--method", "batch", "-o", join(out, "c.json")]);
    expect(r.code).toBe(0);
    expect(readdirSync(out)).toEqual(["c.json"]);
  });
});

describe("models and model files", () => {
  it("a file that is not GGUF, and a directory, given as --model-path: one line naming it, exit 2", async () => {
    expectOneLine(
      await inProcess(["ask", "-q", job, "--state", job, "--model-path", notGguf]),
      EXIT.usage,
      /^typed-eval: cannot load model file .*weights\.gguf: the model file is not a GGUF file/,
    );
    expectOneLine(
      await inProcess(["ask", "-q", job, "--state", job, "--model-path", aDirectory]),
      EXIT.usage,
      /^typed-eval: model file .*a-directory is a directory, not a GGUF file/,
    );
  });

  it("models list with a registry that is a directory (exit 2); models pull from a host that refuses (resumable: exit 3)", async () => {
    expectOneLine(await inProcess(["models", "list", "--models-file", aDirectory]), EXIT.usage, /cannot read model registry .*a-directory: EISDIR/);
    const port = await closedPort();
    expectOneLine(
      await runInProcess(["models", "pull", "--models-dir", join(dir, "models")], { HF_ENDPOINT: `http://127.0.0.1:${port}` }),
      EXIT.aborted,
      new RegExp(`^typed-eval: cannot reach http://127\\.0\\.0\\.1:${port}/.*Offline\\?`),
    );
  });

  it("keys create --models refuses a model the registry does not have, and writes nothing", async () => {
    const accounts = join(dir, "accounts.json");
    const r = await inProcess(["keys", "create", "--account", "ops", "--models", "default", "tiny", "--accounts-file", accounts]);
    expectOneLine(r, EXIT.usage, /^typed-eval: --models: no model of the registry is named "tiny"; known: default, qwen2\.5-0\.5b-instruct, /);
    expect(existsSync(accounts)).toBe(false);
    // A registry of one's own extends what the server has.
    const registry = join(dir, "models.json");
    writeFileSync(
      registry,
      JSON.stringify({
        models: [
          {
            name: "tiny",
            version: "0.1.0",
            aliases: [],
            description: "generated",
            release_date: "2026-01-01",
            engine: "llama",
            temperature: 1,
            path: generatedModel(TINY),
            context_size: 2048,
            price_per_million_input_tokens: 0,
          },
        ],
      }),
    );
    const ok = await inProcess(["keys", "create", "--account", "ops", "--models", "tiny", "--models-file", registry, "--accounts-file", accounts]);
    expect(ok.stderr).toMatch(/Created a key for account ops/);
    expect(ok.code).toBe(0);
    expect(JSON.parse(readFileSync(accounts, "utf8"))).toMatchObject({ accounts: [{ name: "ops", models: ["tiny"] }] });
  });
});

describe("serve on an address it cannot listen on", () => {
  let taken: Server;
  let port: number;
  beforeAll(async () => {
    taken = createServer();
    await new Promise<void>((done) => taken.listen({ host: "127.0.0.1", port: 0 }, done));
    port = (taken.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((done) => taken.close(() => done())));

  it("a port in use: one line before any model loads, exit 2 (in process)", async () => {
    const accounts = join(dir, "serve-accounts.json");
    await inProcess(["keys", "create", "--account", "ops", "--accounts-file", accounts]);
    // A model path that does not exist: the port is checked first, so it is never reached.
    const r = await inProcess(["serve", "--accounts-file", accounts, "--model-path", join(dir, "none.gguf"), "--port", String(port)]);
    expectOneLine(
      r,
      EXIT.usage,
      new RegExp(`^typed-eval: the address 127\\.0\\.0\\.1:${port} is already in use: stop whatever listens there, or choose another --port$`),
    );
    const metrics = await inProcess([
      "serve",
      "--accounts-file",
      accounts,
      "--model-path",
      join(dir, "none.gguf"),
      "--port",
      "0",
      "--metrics-port",
      String(port),
    ]);
    expectOneLine(metrics, EXIT.usage, /already in use/);
  });

  it("the real process: a second serve on a used port prints one line and exits 2", () => {
    const accounts = join(dir, "serve-accounts.json");
    const r = spawnSync(process.execPath, [BIN, "serve", "--accounts-file", accounts, "--model-path", generatedModel(TINY), "--port", String(port)], {
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(r.stderr).toBe(`typed-eval: the address 127.0.0.1:${port} is already in use: stop whatever listens there, or choose another --port\n`);
    expect(r.status).toBe(EXIT.usage);
  });
});

describe("ask", () => {
  it("an empty stdin is an error: one line, exit 2, no response printed", () => {
    const r = spawnSync(process.execPath, [BIN, "ask", "-q", job, "--model-path", generatedModel(TINY)], { input: "", encoding: "utf8", timeout: 30_000 });
    expect(r.stderr).toBe(
      "typed-eval: the state is empty: nothing came on stdin; pipe a state in (echo '{...}' | typed-eval ask ...) or name a file with --state\n",
    );
    expect(r.stdout).toBe("");
    expect(r.status).toBe(EXIT.usage);
  });

  it("an empty state file likewise", async () => {
    const empty = join(dir, "empty.txt");
    writeFileSync(empty, " \n");
    expectOneLine(await inProcess(["ask", "-q", job, "--state", empty, "--model-path", generatedModel(TINY)]), EXIT.usage, /the state .*empty\.txt is empty/);
  });
});

describe("third-party notices", () => {
  it("the AWS SDK's Node-version notice is kept off stderr; other warnings still print", async () => {
    const seen: string[] = [];
    const listener = (w: Error) => seen.push(w.message);
    process.on("warning", listener);
    try {
      quietThirdPartyNotices();
      // The SDK's own check, on this Node (it warns below Node 22; on 22 and later this case proves nothing).
      new S3Client({ region: "us-east-1" }).destroy();
      process.emitWarning("a warning of our own");
      // Warnings are emitted on the next tick.
      await new Promise((done) => setImmediate(done));
    } finally {
      process.off("warning", listener);
    }
    expect(seen).toEqual(["a warning of our own"]);
  });
});
