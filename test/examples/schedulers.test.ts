/**
 * The scheduler examples run as written: the crontab's job line through
 * /bin/sh with only its variables pointed here, and both Airflow forms'
 * command lines as the DAG builds them (extracted from the Python file: no
 * Airflow here), against a real S3-compatible server (s3rver) holding the
 * night's tickets and a real endpoint (this process) serving a generated
 * model behind an API key. Docker, Kubernetes and Airflow themselves are not
 * run here; the image's entrypoint and the pod's arguments are checked as text.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { GetObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { startS3Store, type S3Store } from "../support/s3-proxy.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openModels } from "../../src/evaluator/factory.js";
import type { ModelRouter } from "../../src/evaluator/router.js";
import { createLogger } from "../../src/logging/logger.js";
import { ModelRegistry } from "../../src/models/registry.js";
import { AccountStore, createKey } from "../../src/server/accounts.js";
import { type RunningServer, startServer } from "../../src/server/serve.js";
import { BIN } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";

const ROOT = join(import.meta.dirname, "../..");
const EXAMPLES = join(ROOT, "examples/schedulers");
const TICKETS = join(ROOT, "examples/data/tickets.jsonl");
const BUCKET = "acme-support";
// The night, and the one before, as the crontab's `date +%F` computes them (local time).
const day = execFileSync("date", ["+%F"], { encoding: "utf8" }).trim();
const yesterday = execFileSync("date", ["-d", "yesterday", "+%F"], { encoding: "utf8" }).trim();

let dir: string;
let binDir: string;
let s3: S3Store;
let client: S3Client;
let s3Env: Record<string, string>;
let router: ModelRouter;
let api: RunningServer;
let key: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-schedulers-"));
  // Through the proxy that gives s3rver the conditional writes an S3 journal's lock needs, as S3 has.
  s3 = await startS3Store(join(dir, "s3"), [BUCKET]);
  s3Env = s3.env;
  client = s3.client;
  await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `tickets/${day}/tickets.jsonl`, Body: readFileSync(TICKETS) }));
  // The endpoint the examples' --base-url names, with an account whose key the examples must supply.
  const accounts = join(dir, "accounts.json");
  key = createKey(accounts, "nightly", undefined);
  router = await openModels(["default"], { registry: ModelRegistry.load(), modelPath: generatedModel(TINY), threads: 1 });
  api = await startServer({ host: "127.0.0.1", port: 0, evaluator: router, accounts: AccountStore.load(accounts), logger: createLogger({ level: "silent" }) });
  // `typed-eval` on PATH, as `npm install -g` puts it.
  binDir = join(dir, "bin");
  mkdirSync(binDir);
  symlinkSync(BIN, join(binDir, "typed-eval"));
}, 120_000);

afterAll(async () => {
  await api?.shutdown("test over");
  await s3?.close();
});

/** Runs a process without blocking this one (the endpoint it calls lives here). */
function exec(file: string, args: string[], options: { env: Record<string, string | undefined>; cwd: string }) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(file, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Last night's answers of a shard: tonight's as they are (no drift), or with every ticket sent to one team (drift). */
async function putLastNight(part: string, drifted: boolean): Promise<void> {
  const rows = await objectRows(`answers/${day}/${part}.jsonl`);
  const first = rows[0];
  if (first === undefined) throw new Error(`answers/${day}/${part}.jsonl holds no answers to copy as last night's`);
  const teams = Object.keys((first.answers["team"] as { probabilities: Record<string, number> }).probabilities);
  const last = rows.map((row) => {
    if (!drifted) return row;
    const probabilities = Object.fromEntries(teams.map((t) => [t, t === "other" ? 1 : 0]));
    return { ...row, answers: { ...row.answers, team: { type: "choice", choice: "other", probabilities, confidence: 1 } } };
  });
  const body = `${last.map((r) => JSON.stringify(r)).join("\n")}\n`;
  await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `answers/${yesterday}/${part}.jsonl`, Body: body }));
}

async function objectRows(objectKey: string): Promise<{ id: string; answers: Record<string, unknown> }[]> {
  const object = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: objectKey }));
  const text = await object.Body?.transformToString();
  return (text ?? "")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as { id: string; answers: Record<string, unknown> });
}

const ticketCount = readFileSync(TICKETS, "utf8")
  .split("\n")
  .filter((l) => l.trim() !== "").length;

describe("examples/schedulers/crontab", () => {
  const text = readFileSync(join(EXAMPLES, "crontab"), "utf8");
  const lines = text.split("\n").filter((l) => l.trim() !== "" && !l.trimStart().startsWith("#"));
  const vars = Object.fromEntries(lines.flatMap((l) => (/^([A-Z_]+)=(.*)$/.exec(l) ? [[l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]] : [])));
  const jobs = lines.filter((l) => !/^[A-Z_]+=/.test(l));

  it("has one job line: the installed typed-eval under flock -n with the key from a file, then the drift gate, then the marker", () => {
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatch(/TYPED_EVAL_API_KEY=\$\(cat \$KEY_FILE\) flock -n \S+ typed-eval run /);
    expect(jobs[0]).toMatch(/>> \$LOG 2>&1 && typed-eval report \$ANSWERS --compare .* --fail-if "\$DRIFT_GATE" .* && touch \$STATE\/labels-ready-/);
    expect(vars["PATH"]).toMatch(/\/usr\/local\/bin/);
  });

  it("the job line runs as written: the night's shard answered into S3; the drift gate marks it ready only when last night is there and the labels did not move", async () => {
    // Cron runs the part after the five time fields with /bin/sh; `\%` is a literal %.
    const command = (jobs[0] as string).replace(/^(\S+\s+){5}/, "").replace(/\\%/g, "%");
    expect(command).not.toMatch(/(^|[^\\])%(?!F)/);
    const state = join(dir, "cron-state");
    mkdirSync(state);
    writeFileSync(join(dir, "api-key"), `${key}\n`, { mode: 0o600 });
    const env = {
      // What cron gives a job: its own variables, HOME and LOGNAME; S3 credentials as ~/.aws would.
      ...vars,
      HOME: dir,
      LOGNAME: "typed-eval",
      ...s3Env,
      PATH: `${binDir}:${dirname(process.execPath)}:${vars["PATH"]}`,
      STATE: state,
      KEY_FILE: join(dir, "api-key"),
      JOB: join(ROOT, "jobs/support-triage.json"),
      BASE_URL: api.url,
      LOG: join(state, "triage.log"),
    };
    const marker = join(state, `labels-ready-${day}-1-4`);
    const cron = () => exec("/bin/sh", ["-c", command], { env, cwd: dir });
    // The first night: answered, but no last night to compare with: mailed (stdout), not marked ready.
    let r = await cron();
    let log = readFileSync(join(state, "triage.log"), "utf8");
    expect(r.code).toBe(0);
    expect(r.stdout, log).toMatch(new RegExp(`shard 1/4 on ${day}: exit 2, labels not marked ready`));
    expect(log).toMatch(new RegExp(`cannot read answers s3://acme-support/answers/${yesterday}/part-1-4\\.jsonl: no such key`));
    expect(log).not.toMatch(/NodeVersionSupportWarning|\n\s+at /);
    expect(existsSync(join(state, "triage-1-4.flock"))).toBe(true);
    expect(existsSync(marker)).toBe(false);
    const rows = await objectRows(`answers/${day}/part-1-4.jsonl`);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.length).toBeLessThan(ticketCount);
    for (const row of rows) expect(Object.keys(row.answers).length).toBeGreaterThan(0);
    // Last night labelled alike: the rerun resumes (nothing to ask), the gate holds, the night is marked ready, nothing mailed.
    await putLastNight("part-1-4", false);
    r = await cron();
    log = readFileSync(join(state, "triage.log"), "utf8");
    expect(r.stdout, log).toBe("");
    expect(existsSync(marker)).toBe(true);
    expect(existsSync(join(state, `drift-${day}-1-4.html`))).toBe(true);
    // Last night sent every ticket to one team: tonight's shares moved past the gate, exit 4, mailed, no marker.
    rmSync(marker);
    await putLastNight("part-1-4", true);
    r = await cron();
    log = readFileSync(join(state, "triage.log"), "utf8");
    expect(r.stdout, log).toMatch(/exit 4, labels not marked ready \(4: they drifted from last night/);
    expect(log).toMatch(/drift gate: team\.psi/);
    expect(existsSync(marker)).toBe(false);
  }, 180_000);
});

describe("examples/schedulers/airflow_dag.py", () => {
  const py = readFileSync(join(EXAMPLES, "airflow_dag.py"), "utf8");
  const code = py
    .split("\n")
    .filter((l) => !l.trimStart().startsWith("#"))
    .join("\n");
  const constants = Object.fromEntries([...py.matchAll(/^([A-Z_]+) = (\d+|"[^"]*")$/gm)].map((m) => [m[1] as string, (m[2] as string).replace(/^"|"$/g, "")]));

  /** The strings of a Python list body: literals, f-strings (their {names} from `scope`) and module constants. */
  function listItems(body: string, scope: Record<string, string>): string[] {
    return [...body.matchAll(/(f?)"([^"]*)"|\b([A-Z_]{2,})\b/g)].map((m) => {
      if (m[3] !== undefined) return constants[m[3]] as string;
      return m[1] ? (m[2] as string).replace(/\{(\w+)\}/g, (_, name: string) => scope[name] ?? constants[name] ?? `{${name}}`) : (m[2] as string);
    });
  }

  function runArgs(shard: number): string[] {
    const body = /def run_args\(shard: int, ds: str\) -> list\[str\]:\s*return \[([\s\S]*?)\n {4}\]/.exec(py)?.[1];
    expect(body, "run_args(shard, ds) returning a list").toBeDefined();
    return listItems(body as string, { shard: String(shard), ds: day });
  }

  /** The DAG's placeholders for what exists only on Airflow's machines, pointed here. */
  function local(args: string[], worker: string): string[] {
    return args.map((a) =>
      a
        .replace(constants["BASE_URL"] as string, api.url)
        .replace("/app/jobs/", `${ROOT}/jobs/`)
        .replace("/airflow/xcom/", `${worker}/xcom/`)
        .replace("/var/lib/typed-eval", worker),
    );
  }

  it("the pod form keeps the image's entrypoint (tini as PID 1): arguments only, no cmds", () => {
    expect(code).not.toMatch(/\bcmds\s*=/);
    const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--", "typed-eval"\]$/m);
    expect(dockerfile).toMatch(/apt-get install -y --no-install-recommends tini/);
  });

  it("the pod form's command line runs: shard 2/4 answered into S3, its summary where XCom reads it", async () => {
    const extra = /arguments=run_args\(i, "\{\{ ds \}\}"\) \+ \[([^\]]*)\]/.exec(code)?.[1];
    expect(extra).toBeDefined();
    const worker = join(dir, "pod");
    const args = local([...runArgs(2), ...listItems(extra as string, {})], worker);
    // The image's entrypoint is `tini -- typed-eval`; tini is not here, typed-eval is.
    const r = await exec(join(binDir, "typed-eval"), args, {
      env: { ...process.env, ...s3Env, PATH: `${binDir}:${process.env["PATH"]}`, TYPED_EVAL_API_KEY: key },
      cwd: dir,
    });
    expect(r.stderr).not.toMatch(/NodeVersionSupportWarning|\n\s+at /);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(readFileSync(join(worker, "xcom/return.json"), "utf8")) as { status: string; records: { answered: number } };
    expect(summary.status).toBe("done");
    const rows = await objectRows(`answers/${day}/part-2.jsonl`);
    expect(rows.length).toBe(summary.records.answered);
    expect(rows.length).toBeGreaterThan(0);
  }, 180_000);

  it("the worker form adds the key to the worker's environment and runs typed-eval from PATH: shard 3/4", async () => {
    const call = /subprocess\.call\(\s*\[([^\]]*)\],\s*#[^\n]*\n\s*env=\{([^}]*)\}/.exec(py);
    expect(call, "subprocess.call([...], env={...})").not.toBeNull();
    const [, argv, envExpr] = call as RegExpExecArray;
    // The worker's environment passes through (PATH, HOME, AWS_*): the key is added to it.
    expect(envExpr).toMatch(/^\*\*os\.environ, "TYPED_EVAL_API_KEY": key$/);
    const summaryPath = /summary_path = f"([^"]*)"/.exec(py)?.[1];
    expect(summaryPath).toBeDefined();
    const items = (argv as string).split(",").map((s) => s.trim());
    expect(items[0]).toBe('"typed-eval"');
    expect(items[1]).toBe("*args");
    const worker = join(dir, "worker");
    mkdirSync(worker);
    const summary = local([(summaryPath as string).replace("{ds}", day).replace("{shard}", "3")], worker)[0] as string;
    const args = local(runArgs(3), worker);
    // The worker's own environment (with the S3 credentials it has), plus the key.
    const r = await exec("typed-eval", [...args, "--summary-json", summary], {
      env: { ...process.env, ...s3Env, PATH: `${binDir}:${process.env["PATH"]}`, TYPED_EVAL_API_KEY: key },
      cwd: worker,
    });
    expect(r.stderr).not.toMatch(/NodeVersionSupportWarning|\n\s+at /);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(readFileSync(summary, "utf8"))).toMatchObject({ status: "done" });
    expect((await objectRows(`answers/${day}/part-3.jsonl`)).length).toBeGreaterThan(0);
  }, 180_000);

  it("each shard's drift gate runs as written after it: both forms call gate_args, downstream of their shard", () => {
    expect(code).toMatch(/arguments=gate_args\(i, "\{\{ ds \}\}", "\{\{ macros\.ds_add\(ds, -1\) \}\}"\)/);
    expect(code).toMatch(/subprocess\.call\(\["typed-eval", \*gate_args\(shard, ds, prev_ds\)\]/);
    expect(code.match(/shard_task >> gate/g)).toHaveLength(2);
    expect(code).toMatch(/if code == GATE_FAILED:\s*raise AirflowFailException/);
  });

  it("the worker form's drift gate: holds against last night's same labels, exit 4 against drifted ones", async () => {
    const body = /def gate_args\(shard: int, ds: str, prev_ds: str\) -> list\[str\]:\s*return \[([\s\S]*?)\n {4}\]/.exec(py)?.[1];
    expect(body, "gate_args(shard, ds, prev_ds) returning a list").toBeDefined();
    const worker = join(dir, "worker");
    const args = local(listItems(body as string, { shard: "3", ds: day, prev_ds: yesterday }), worker);
    const gate = () => exec("typed-eval", args, { env: { ...process.env, ...s3Env, PATH: `${binDir}:${process.env["PATH"]}` }, cwd: worker });
    await putLastNight("part-3", false);
    let r = await gate();
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(join(worker, `drift-${day}-part-3.html`))).toBe(true);
    await putLastNight("part-3", true);
    r = await gate();
    expect(r.code, r.stderr).toBe(Number(constants["GATE_FAILED"]));
    expect(r.stderr).toMatch(/drift gate: team\.psi/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 60_000);
});
