/**
 * The scheduler examples run as written: the crontab's lines through /bin/sh
 * with the file's own variables (BASE_URL, the one site setting that names a
 * host, pointed at the local endpoint), and both Airflow forms' command lines
 * as the DAG builds them (extracted from the Python file: no Airflow here),
 * with no path rewritten: each runs in a private mount namespace where
 * temporary folders are mounted at the paths the examples name
 * (/var/lib/typed-eval, /etc/typed-eval, /airflow/xcom, /state) and at
 * /usr/local/bin (this checkout's typed-eval and this Node, as `npm install
 * -g` puts them), against a real S3-compatible server holding acme-support
 * and a real endpoint serving a generated model behind an API key. Docker,
 * Kubernetes and Airflow themselves are not run; the image's entrypoint and
 * the pod's arguments are checked as text.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canUnshare, runMounted } from "../support/namespace.js";
import { EXAMPLES, type Night, ROOT, startNight, ticketCount } from "../support/night.js";

if (!canUnshare) {
  process.stderr.write("\n*** SKIPPED the scheduler examples run as written: no private mount namespace here (they need root and `unshare --mount`) ***\n\n");
}

let night: Night;

beforeAll(async () => {
  if (canUnshare) night = await startNight("te-schedulers-");
}, 120_000);

afterAll(async () => {
  await night?.close();
});

/** A fresh temporary folder under the test's own. */
function folder(name: string): string {
  const path = join(night.dir, name);
  mkdirSync(path, { recursive: true });
  return path;
}

const noStack = /NodeVersionSupportWarning|\n\s+at /;

describe.skipIf(!canUnshare)("examples/schedulers/crontab", () => {
  const text = readFileSync(join(EXAMPLES, "crontab"), "utf8");
  const lines = text.split("\n").filter((l) => l.trim() !== "" && !l.trimStart().startsWith("#"));
  const vars = Object.fromEntries(lines.flatMap((l) => (/^([A-Z_]+)=(.*)$/.exec(l) ? [[l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]] : [])));
  const jobs = lines.filter((l) => !/^[A-Z_]+=/.test(l));

  it("has one job line: the installed typed-eval under flock -n with the key from a file, then the drift gate, then the marker", () => {
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatch(/TYPED_EVAL_API_KEY=\$\(cat \$KEY_FILE\) flock -n \S+ typed-eval run .* --job \$JOB /);
    expect(jobs[0]).toMatch(/>> \$LOG 2>&1 && typed-eval report \$ANSWERS --compare .* --fail-if "\$DRIFT_GATE" .* && touch \$STATE\/labels-ready-/);
    expect(vars).toMatchObject({
      PATH: "/usr/local/bin:/usr/bin:/bin",
      STATE: "/var/lib/typed-eval",
      KEY_FILE: "/etc/typed-eval/api-key",
      JOB: "support-triage",
    });
  });

  it("the job line runs as written: the night's shard answered into S3; the drift gate marks it ready only when last night is there and the labels did not move", async () => {
    // Cron runs the part after the five time fields with /bin/sh; `\%` is a literal %.
    const command = (jobs[0] as string).replace(/^(\S+\s+){5}/, "").replace(/\\%/g, "%");
    expect(command).not.toMatch(/(^|[^\\])%(?!F)/);
    const state = folder("cron/var-lib-typed-eval");
    const keys = folder("cron/etc-typed-eval");
    writeFileSync(join(keys, "api-key"), `${night.key}\n`, { mode: 0o600 });
    // What cron gives a job: the crontab's variables, HOME and LOGNAME; S3 credentials as ~/.aws would. BASE_URL is the site's endpoint.
    const env = { ...vars, HOME: night.dir, LOGNAME: "typed-eval", ...night.s3Env, BASE_URL: night.api.url };
    const binds = { "/var/lib/typed-eval": state, "/etc/typed-eval": keys, "/usr/local/bin": night.binDir };
    const cron = () => runMounted(binds, ["/bin/sh", "-c", command], { cwd: "/", env });
    const { local: day } = night.day;
    const marker = join(state, `labels-ready-${day}-1-4`);
    const log = () => readFileSync(join(state, "triage.log"), "utf8");
    // The first night: answered, but no last night to compare with: mailed (stdout), not marked ready.
    let r = await cron();
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout, log()).toMatch(new RegExp(`shard 1/4 on ${day}: exit 2, labels not marked ready`));
    expect(log()).toMatch(new RegExp(`cannot read answers s3://acme-support/answers/${night.yesterday.local}/part-1-4\\.jsonl: no such key`));
    expect(log()).not.toMatch(noStack);
    expect(existsSync(join(state, "triage-1-4.flock"))).toBe(true);
    expect(existsSync(marker)).toBe(false);
    const rows = await night.rows(`answers/${day}/part-1-4.jsonl`);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.length).toBeLessThan(ticketCount);
    for (const row of rows) expect(Object.keys(row.answers).length).toBeGreaterThan(0);
    // Last night labelled alike: the rerun resumes (nothing to ask), the gate holds, the night is marked ready, nothing mailed.
    const [tonight, lastNight] = [`answers/${day}/part-1-4.jsonl`, `answers/${night.yesterday.local}/part-1-4.jsonl`];
    await night.putLastNight(tonight, lastNight, false);
    r = await cron();
    expect(r.stdout, log()).toBe("");
    expect(existsSync(marker)).toBe(true);
    expect(existsSync(join(state, `drift-${day}-1-4.html`))).toBe(true);
    // Last night sent every ticket to one team: tonight's shares moved past the gate, exit 4, mailed, no marker.
    rmSync(marker);
    await night.putLastNight(tonight, lastNight, true);
    r = await cron();
    expect(r.stdout, log()).toMatch(/exit 4, labels not marked ready \(4: they drifted from last night/);
    expect(log()).toMatch(/drift gate: team\.psi/);
    expect(existsSync(marker)).toBe(false);
  }, 180_000);
});

describe.skipIf(!canUnshare)("examples/schedulers/airflow_dag.py", () => {
  const py = readFileSync(join(EXAMPLES, "airflow_dag.py"), "utf8");
  const code = py
    .split("\n")
    .filter((l) => !l.trimStart().startsWith("#"))
    .join("\n");
  const constants = Object.fromEntries([...py.matchAll(/^([A-Z_]+) = (\d+|"[^"]*")$/gm)].map((m) => [m[1] as string, (m[2] as string).replace(/^"|"$/g, "")]));

  /** The strings of a Python list body: literals, f-strings (their {names} from `scope`) and module constants; BASE_URL is the local endpoint. */
  function listItems(body: string, scope: Record<string, string>): string[] {
    const constant = (name: string) => (name === "BASE_URL" ? night.api.url : (constants[name] as string));
    return [...body.matchAll(/(f?)"([^"]*)"|\b([A-Z_]{2,})\b/g)].map((m) => {
      if (m[3] !== undefined) return constant(m[3]);
      return m[1] ? (m[2] as string).replace(/\{(\w+)\}/g, (_, name: string) => scope[name] ?? constant(name) ?? `{${name}}`) : (m[2] as string);
    });
  }

  function runArgs(shard: number): string[] {
    const body = /def run_args\(shard: int, ds: str\) -> list\[str\]:\s*return \[([\s\S]*?)\n {4}\]/.exec(py)?.[1];
    expect(body, "run_args(shard, ds) returning a list").toBeDefined();
    return listItems(body as string, { shard: String(shard), ds: night.day.local });
  }

  /** The worker's environment (with the S3 credentials it has), typed-eval on its PATH. */
  const workerEnv = () => ({ ...process.env, ...night.s3Env, PATH: `/usr/local/bin:${process.env["PATH"]}` });

  it("the pod form keeps the image's entrypoint (tini as PID 1): arguments only, no cmds; both forms name the bundled job", () => {
    expect(code).not.toMatch(/\bcmds\s*=/);
    const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--", "typed-eval"\]$/m);
    expect(dockerfile).toMatch(/apt-get install -y --no-install-recommends tini/);
    expect(code).toMatch(/"--job", "support-triage",/);
  });

  it("the pod form's command line runs as written: shard 2/4 answered into S3, its summary at /airflow/xcom/return.json", async () => {
    const extra = /arguments=run_args\(i, "\{\{ ds \}\}"\) \+ \[([^\]]*)\]/.exec(code)?.[1];
    expect(extra).toBeDefined();
    const args = [...runArgs(2), ...listItems(extra as string, {})];
    expect(args).toContain("/airflow/xcom/return.json");
    const [xcom, state] = [folder("pod/airflow-xcom"), folder("pod/state")];
    // The image's entrypoint is `tini -- typed-eval`, its WORKDIR /state, its PATH Node's image's; tini is not here, typed-eval is.
    const env = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME: night.dir, ...night.s3Env, TYPED_EVAL_API_KEY: night.key };
    const r = await runMounted({ "/airflow/xcom": xcom, "/state": state, "/usr/local/bin": night.binDir }, ["typed-eval", ...args], { cwd: "/state", env });
    expect(r.stderr).not.toMatch(noStack);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(readFileSync(join(xcom, "return.json"), "utf8")) as { status: string; records: { answered: number } };
    expect(summary.status).toBe("done");
    const rows = await night.rows(`answers/${night.day.local}/part-2.jsonl`);
    expect(rows.length).toBe(summary.records.answered);
    expect(rows.length).toBeGreaterThan(0);
  }, 180_000);

  it("the worker form adds the key to the worker's environment and runs typed-eval from PATH in /var/lib/typed-eval: shard 3/4", async () => {
    const call = /subprocess\.call\(\s*\[([^\]]*)\],\s*#[^\n]*\n\s*env=\{([^}]*)\},\s*cwd="([^"]*)",?\s*\)/.exec(py);
    expect(call, "subprocess.call([...], env={...}, cwd=...)").not.toBeNull();
    const [, argv, envExpr, cwd] = call as RegExpExecArray;
    // The worker's environment passes through (PATH, HOME, AWS_*): the key is added to it.
    expect(envExpr).toMatch(/^\*\*os\.environ, "TYPED_EVAL_API_KEY": key$/);
    expect(cwd).toBe("/var/lib/typed-eval");
    const summaryPath = /summary_path = f"([^"]*)"/.exec(py)?.[1];
    expect(summaryPath).toBeDefined();
    const items = (argv as string).split(",").map((s) => s.trim());
    expect(items).toEqual(['"typed-eval"', "*args", '"--summary-json"', "summary_path"]);
    const summary = (summaryPath as string).replace("{ds}", night.day.local).replace("{shard}", "3");
    const state = folder("worker/var-lib-typed-eval");
    const r = await runMounted({ "/var/lib/typed-eval": state, "/usr/local/bin": night.binDir }, ["typed-eval", ...runArgs(3), "--summary-json", summary], {
      cwd: cwd as string,
      env: { ...workerEnv(), TYPED_EVAL_API_KEY: night.key },
    });
    expect(r.stderr).not.toMatch(noStack);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(state, summary.slice("/var/lib/typed-eval/".length)), "utf8"))).toMatchObject({ status: "done" });
    expect((await night.rows(`answers/${night.day.local}/part-3.jsonl`)).length).toBeGreaterThan(0);
  }, 180_000);

  it("each shard's drift gate runs as written after it: both forms call gate_args, downstream of their shard", () => {
    expect(code).toMatch(/arguments=gate_args\(i, "\{\{ ds \}\}", "\{\{ macros\.ds_add\(ds, -1\) \}\}"\)/);
    expect(code).toMatch(/subprocess\.call\(\["typed-eval", \*gate_args\(shard, ds, prev_ds\)\], cwd="\/var\/lib\/typed-eval"\)/);
    expect(code.match(/shard_task >> gate/g)).toHaveLength(2);
    expect(code).toMatch(/if code == GATE_FAILED:\s*raise AirflowFailException/);
  });

  it("the worker form's drift gate: holds against last night's same labels, exit 4 against drifted ones", async () => {
    const body = /def gate_args\(shard: int, ds: str, prev_ds: str\) -> list\[str\]:\s*return \[([\s\S]*?)\n {4}\]/.exec(py)?.[1];
    expect(body, "gate_args(shard, ds, prev_ds) returning a list").toBeDefined();
    const { local: day } = night.day;
    const args = listItems(body as string, { shard: "3", ds: day, prev_ds: night.yesterday.local });
    const state = folder("worker/var-lib-typed-eval");
    const gate = () =>
      runMounted({ "/var/lib/typed-eval": state, "/usr/local/bin": night.binDir }, ["typed-eval", ...args], { cwd: "/var/lib/typed-eval", env: workerEnv() });
    const [tonight, lastNight] = [`answers/${day}/part-3.jsonl`, `answers/${night.yesterday.local}/part-3.jsonl`];
    await night.putLastNight(tonight, lastNight, false);
    let r = await gate();
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(join(state, `drift-${day}-part-3.html`))).toBe(true);
    await night.putLastNight(tonight, lastNight, true);
    r = await gate();
    expect(r.code, r.stderr).toBe(Number(constants["GATE_FAILED"]));
    expect(r.stderr).toMatch(/drift gate: team\.psi/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 60_000);
});
