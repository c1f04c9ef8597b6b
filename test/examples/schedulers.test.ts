/**
 * The scheduler examples run as written: the crontab's lines through /bin/sh
 * with the file's own variables (BASE_URL, the one site setting that names a
 * host, pointed at the local endpoint), and the Airflow drift gate's command
 * line as the DAG builds it (extracted from the Python file; the DAG's tasks
 * themselves run on Airflow stand-ins in airflow.test.ts),
 * with no path rewritten: each runs in a private mount namespace where
 * temporary folders are mounted at the paths the examples name
 * (/var/lib/typed-eval, /etc/typed-eval, /airflow/xcom, /state) and at
 * /usr/local/bin (this checkout's typed-eval and this Node, as `npm install
 * -g` puts them), against a real S3-compatible server holding acme-support
 * and a real endpoint serving a generated model behind an API key. Docker,
 * Kubernetes and Airflow themselves are not run; the image's entrypoint and
 * the pod's arguments are checked as text.
 */
import { spawn, spawnSync } from "node:child_process";
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

  it("has one job line: the installed typed-eval under flock -n -E 7 with the key from a file, then the drift gate, then the marker", () => {
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatch(/TYPED_EVAL_API_KEY=\$\(cat \$KEY_FILE\) flock -n -E 7 \S+ typed-eval run .* --job \$JOB /);
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
    expect(log()).toMatch(new RegExp(`cannot read --compare s3://acme-support/answers/${night.yesterday.local}/part-1-4\\.jsonl: no such key`));
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

  it("a night still running at the next start: flock refuses the job line with 7 (locked), which cron mails as such, and runs nothing", async () => {
    const command = (jobs[0] as string).replace(/^(\S+\s+){5}/, "").replace(/\\%/g, "%");
    const state = folder("cron-overlap/var-lib-typed-eval");
    const keys = folder("cron-overlap/etc-typed-eval");
    writeFileSync(join(keys, "api-key"), `${night.key}\n`, { mode: 0o600 });
    const env = { ...vars, HOME: night.dir, LOGNAME: "typed-eval", ...night.s3Env, BASE_URL: night.api.url };
    const binds = { "/var/lib/typed-eval": state, "/etc/typed-eval": keys, "/usr/local/bin": night.binDir };
    // The night before, still running: it holds the shard's flock (one process holding the descriptor itself).
    const lockFile = join(state, "triage-1-4.flock");
    const holder = spawn("/bin/sh", ["-c", 'exec 9>"$0"; flock 9; exec sleep 60', lockFile], { stdio: "ignore" });
    try {
      for (let i = 0; i < 100 && spawnSync("flock", ["-n", lockFile, "true"]).status === 0; i++) spawnSync("sleep", ["0.05"]);
      const r = await runMounted(binds, ["/bin/sh", "-c", command], { cwd: "/", env });
      expect(r.stdout).toMatch(new RegExp(`shard 1/4 on ${night.day.local}: exit 7, labels not marked ready`));
      // Nothing ran: the log (opened by the shell for the line) holds nothing.
      expect(readFileSync(join(state, "triage.log"), "utf8")).toBe("");
    } finally {
      holder.kill();
    }
  }, 60_000);
});

// The DAG's tasks run on Airflow stand-ins in airflow.test.ts; here, what its text must say.
describe("examples/schedulers/airflow_dag.py", () => {
  const py = readFileSync(join(EXAMPLES, "airflow_dag.py"), "utf8");
  const code = py
    .split("\n")
    .filter((l) => !l.trimStart().startsWith("#"))
    .join("\n");

  it("the pod form keeps the image's entrypoint (tini as PID 1): arguments only, no cmds; both forms name the bundled job", () => {
    expect(code).not.toMatch(/\bcmds\s*=/);
    const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--", "typed-eval"\]$/m);
    expect(dockerfile).toMatch(/apt-get install -y --no-install-recommends tini/);
    expect(code).toMatch(/"--job", "support-triage",/);
  });

  it("each shard's drift gate runs as written after it: both forms call gate_args, downstream of their shard", () => {
    expect(code).toMatch(/arguments=gate_args\(i, "\{\{ ds \}\}", "\{\{ macros\.ds_add\(ds, -1\) \}\}"\)/);
    expect(code).toMatch(/typed_eval\(gate_args\(shard, ds, prev_ds\), cwd="\/var\/lib\/typed-eval"\)/);
    expect(code.match(/shard_task >> gate/g)).toHaveLength(2);
    expect(code).toMatch(/if code == GATE_FAILED:\s*raise AirflowFailException/);
  });
});
