/**
 * examples/schedulers/airflow_dag.py's tasks run as written, on stand-ins for
 * Airflow 2 and its Kubernetes provider that handle what the DAG depends on
 * as they do (test/support/airflow: the task's process group, the SIGTERM
 * handler that raises inside the task, the supervisor's reaping of the
 * group, templates, task states, the pod deleted before the task reads how
 * it ended), driving the real typed-eval against a real S3-compatible server
 * and a real endpoint (serving a generated model, behind a proxy that delays
 * each answer and records each request), in a private mount namespace with
 * temporary folders at the paths the DAG names.
 *
 * What a scheduler must get right, each held here: a worker task killed
 * mid-run ends typed-eval `stopped` with its summary and pays nothing twice
 * on the retry; typed-eval killed outright (137) is retried in both forms, as
 * the Kubernetes example retries it; the pod form maps the exit code of a pod
 * the operator has already deleted (6 skipped, 2 failed for good).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT, KILLED, RESUMABLE } from "../../src/api/exit-codes.js";
import { canUnshare, runMounted } from "../support/namespace.js";
import { EXAMPLES, type Night, ROOT, startNight } from "../support/night.js";
import { startUpstream, type Upstream } from "../support/upstream.js";
import { parse } from "yaml";
import { type PodFailureRule, podFailureAction } from "../support/kubernetes.js";

const PYTHON = "/usr/bin/python3";
const STAND_INS = join(ROOT, "test/support/airflow");
const RUN_TASK = join(STAND_INS, "run_task.py");
const DAG_FILE = join(EXAMPLES, "airflow_dag.py");
const canRun = canUnshare && existsSync(PYTHON);
const SOAK = process.env["SOAK"] === "1";

if (!canRun) {
  process.stderr.write("\n*** SKIPPED the Airflow DAG's tasks on the Airflow stand-ins: they need /usr/bin/python3, root and `unshare --mount` ***\n\n");
}

/** What the stand-in says of a task's end (test/support/airflow/run_task.py). */
interface TaskEnd {
  state: "success" | "skipped" | "failed" | "up_for_retry";
  error?: string;
  xcom?: { status: string; verdict: string; records: { answered: number } };
}

/** The endpoint behind a proxy that holds each request `delayMs` (settable) before passing it on, and keeps every request body. */
async function startSlowEndpoint(
  target: string,
  delayMs: number,
): Promise<Upstream & { bodies: string[]; inFlight: () => number; answered: () => number; delay: (ms: number) => void }> {
  const bodies: string[] = [];
  let [inFlight, answered] = [0, 0];
  const upstream = await startUpstream(async (req, res, text) => {
    const paid = req.method === "POST";
    if (paid) {
      bodies.push(text);
      inFlight++;
      await sleep(delayMs);
    }
    const headers = Object.fromEntries(["authorization", "content-type"].flatMap((h) => (typeof req.headers[h] === "string" ? [[h, req.headers[h]]] : [])));
    const r = await fetch(`${target}${req.url}`, { method: req.method ?? "GET", headers, ...(paid ? { body: text } : {}) });
    res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "application/json" });
    res.end(await r.text());
    if (paid) [inFlight, answered] = [inFlight - 1, answered + 1];
  });
  return { ...upstream, bodies, inFlight: () => inFlight, answered: () => answered, delay: (ms) => (delayMs = ms) };
}

/** The pids of the typed-eval processes under `root` (its descendants whose program is the typed-eval bin). */
function typedEvalUnder(root: number): number[] {
  const parent = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone meanwhile
    }
  }
  const under = (pid: number) => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (p === root) return true;
    return false;
  };
  return [...parent.keys()].filter((pid) => {
    if (!under(pid)) return false;
    try {
      return /(^|\/)typed-eval$/.test(readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[1] ?? "");
    } catch {
      return false;
    }
  });
}

/** The Kubernetes example's podFailurePolicy rules. */
function podFailureRules(): PodFailureRule[] {
  const cron = parse(readFileSync(join(EXAMPLES, "kubernetes.yaml"), "utf8")) as {
    spec: { jobTemplate: { spec: { podFailurePolicy: { rules: PodFailureRule[] } } } };
  };
  return cron.spec.jobTemplate.spec.podFailurePolicy.rules;
}

/** Resolves once `ready()` holds, polling; fails after `ms`, or when `task` ends first (with what it printed). */
async function until(task: Promise<{ stderr: string }>, ready: () => boolean, what: string, ms = 60_000): Promise<void> {
  let ended: { stderr: string } | undefined;
  void task.then((r) => (ended = r)).catch(() => undefined);
  const deadline = Date.now() + ms;
  while (!ready()) {
    if (ended) throw new Error(`the task ended before ${what}:\n${ended.stderr}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe.skipIf(!canRun)("examples/schedulers/airflow_dag.py on Airflow 2 stand-ins", () => {
  let night: Night;
  let endpoint: Awaited<ReturnType<typeof startSlowEndpoint>>;

  beforeAll(async () => {
    night = await startNight("te-airflow-");
    endpoint = await startSlowEndpoint(night.api.url, 1_500);
  }, 120_000);

  afterAll(async () => {
    await endpoint?.close();
    await night?.close();
  });

  let runs = 0;
  /**
   * Runs task `task` of DAG `dag` for night `ds` as `airflow tasks run` would on a worker (the stand-in's
   * supervisor, mounted as the DAG's paths say), BASE_URL pointed at the slow endpoint; `started` gets the
   * supervisor's pid, which a kill of the task signals.
   */
  async function runTask(dag: string, task: string, ds: string, started?: (pid: number) => void) {
    const dir = join(night.dir, `task-${++runs}`);
    const [state, xcom, podState] = [join(dir, "var-lib-typed-eval"), join(dir, "airflow-xcom"), join(dir, "state")];
    for (const d of [state, xcom, podState]) mkdirSync(d, { recursive: true });
    const result = join(dir, "result.json");
    const image = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME: night.dir, ...night.s3Env };
    const env = {
      ...process.env,
      ...night.s3Env,
      PATH: `/usr/local/bin:${process.env["PATH"]}`,
      PYTHONDONTWRITEBYTECODE: "1",
      // The worker form's key: an Airflow connection, as Airflow reads one from the environment.
      AIRFLOW_CONN_TYPED_EVAL_API: `http://:${encodeURIComponent(night.key)}@typed-eval`,
      // The pod form's cluster: the image's entrypoint after tini, its WORKDIR and environment, the secret.
      K8S_STANDIN_ENTRYPOINT: JSON.stringify(["typed-eval"]),
      K8S_STANDIN_WORKDIR: "/state",
      K8S_STANDIN_POD_ENV: JSON.stringify(image),
      K8S_STANDIN_SECRETS: JSON.stringify({ "typed-eval-api": { key: night.key } }),
    };
    const binds = { "/var/lib/typed-eval": state, "/airflow/xcom": xcom, "/state": podState, "/usr/local/bin": night.binDir };
    const r = await runMounted(binds, [PYTHON, RUN_TASK, DAG_FILE, dag, task, ds, result, endpoint.url], {
      cwd: "/",
      env,
      ...(started ? { onStart: started } : {}),
    });
    expect(existsSync(result), `the task wrote no result:\n${r.stderr}`).toBe(true);
    return { ...r, end: JSON.parse(readFileSync(result, "utf8")) as TaskEnd, state };
  }

  it("the worker form, its task killed mid-run (Airflow's SIGTERM to the task's group, its handler raising in the task): typed-eval finishes what is in flight and ends stopped with its summary; the retry resumes and pays for no request twice", async () => {
    const day = night.day.local;
    const sent = endpoint.bodies.length;
    let supervisor = 0;
    const killed = runTask("typed_eval_triage_bash", "shard_3_of_4", day, (pid) => (supervisor = pid));
    await until(killed, () => endpoint.inFlight() >= 2, "two requests in flight");
    const inFlightAtKill = endpoint.bodies.length - sent;
    process.kill(supervisor, "SIGTERM");
    const stop = await killed;
    expect(stop.end.state, stop.stderr).toBe("up_for_retry");
    expect(stop.end.error).toMatch(/^AirflowTaskTerminated/);
    // Forwarded once, not SIGKILLed: the requests in flight were answered, journaled, and the summary says stopped.
    const summaryPath = join(stop.state, day, "part-3.summary.json");
    expect(existsSync(summaryPath), `no summary: typed-eval did not end its run\n${stop.stderr}`).toBe(true);
    expect(JSON.parse(readFileSync(summaryPath, "utf8"))).toMatchObject({ status: "stopped", verdict: "stopped" });
    // The task's log: what the DAG printed (stdout), then typed-eval's own verdict line (stderr).
    expect(stop.stdout).toMatch(/asked to stop; waiting up to 45 s\n.*typed-eval ended with exit 143/);
    expect(stop.stderr).toMatch(/typed-eval: stopped by SIGTERM: the records in flight finished and are kept/);
    expect(endpoint.answered()).toBeGreaterThanOrEqual(inFlightAtKill);
    // The retry: on another worker (a fresh /var/lib/typed-eval), resuming from the journal in S3.
    const retry = await runTask("typed_eval_triage_bash", "shard_3_of_4", day);
    expect(retry.end.state, retry.stderr).toBe("success");
    expect(retry.end.xcom).toMatchObject({ status: "done" });
    const bodies = endpoint.bodies.slice(sent);
    expect(new Set(bodies).size, "a request sent twice: paid twice").toBe(bodies.length);
    expect((await night.rows(`answers/${day}/part-3.jsonl`)).length).toBe(retry.end.xcom?.records.answered);
  }, 120_000);

  it("the worker form's drift gate after that shard: done against last night's same labels, failed for good (exit 4) against drifted ones", async () => {
    const [day, lastNight] = [night.day.local, night.yesterday.local];
    const [tonight, before] = [`answers/${day}/part-3.jsonl`, `answers/${lastNight}/part-3.jsonl`];
    await night.putLastNight(tonight, before, false);
    const held = await runTask("typed_eval_triage_bash", "drift_gate_3_of_4", day);
    expect(held.end.state, held.stderr).toBe("success");
    expect(existsSync(join(held.state, `drift-${day}-part-3.html`))).toBe(true);
    await night.putLastNight(tonight, before, true);
    const drifted = await runTask("typed_eval_triage_bash", "drift_gate_3_of_4", day);
    expect(drifted.end).toMatchObject({ state: "failed", error: expect.stringMatching(/^AirflowFailException: .*drifted past the gate \(exit 4\)/) });
    expect(drifted.stderr).toMatch(/drift gate: team\.psi/);
    expect(drifted.stderr).not.toMatch(/\n\s+at /);
  }, 60_000);

  it("typed-eval killed outright (kill -9, as the out-of-memory killer does): 137, retried in the worker form and the pod form alike, as the Kubernetes example's podFailurePolicy counts it", async () => {
    const rules = podFailureRules();
    expect(podFailureAction(rules, { exitCodes: [{ container: "shard", code: KILLED }], conditions: [] })).toBe("Count");
    for (const [dag, task] of [
      ["typed_eval_triage_bash", "shard_1_of_4"],
      ["typed_eval_triage_k8s", "shard_4_of_4"],
    ] as const) {
      let supervisor = 0;
      const sent = endpoint.bodies.length;
      const run = runTask(dag, task, night.day.local, (pid) => (supervisor = pid));
      await until(run, () => endpoint.bodies.length > sent, `${task}'s first request`);
      const [pid] = typedEvalUnder(supervisor);
      expect(pid, "the typed-eval process of the task").toBeDefined();
      process.kill(pid as number, "SIGKILL");
      const { end, stderr } = await run;
      expect(end.state, stderr).toBe("up_for_retry");
      expect(end.error, `${dag}`).toMatch(/exit 137, killed \(out of memory or kill -9\): retrying/);
    }
  }, 120_000);

  it("the pod form reads the exit code of a pod the operator has already deleted: done (the summary in XCom), 6 skipped, the first night's gate (2) failed for good", async () => {
    const day = night.day.local;
    endpoint.delay(0);
    const done = await runTask("typed_eval_triage_k8s", "shard_2_of_4", day).finally(() => endpoint.delay(1_500));
    expect(done.end.state, done.stderr).toBe("success");
    // XCom: the summary typed-eval wrote at /airflow/xcom/return.json, which the operator read before deleting the pod.
    expect(done.end.xcom).toMatchObject({ status: "done", verdict: "done" });
    const rows = await night.rows(`answers/${day}/part-2.jsonl`);
    expect(rows.length).toBe(done.end.xcom?.records.answered);
    expect(rows.length).toBeGreaterThan(0);
    const noInput = await runTask("typed_eval_triage_k8s", "shard_2_of_4", "2001-01-01");
    expect(noInput.end).toMatchObject({ state: "skipped", error: expect.stringMatching(/no input tonight \(exit 6\)/) });
    // The gate compares with last night, which the first night does not have: 2, not retried.
    const gate = await runTask("typed_eval_triage_k8s", "drift_gate_2_of_4", day);
    expect(gate.end).toMatchObject({ state: "failed", error: expect.stringMatching(/^AirflowFailException: .*exit 2, retrying will not help/) });
  }, 120_000);

  it("every exit code of the table, and 137: the DAG retries exactly what the Kubernetes example counts, skips 6 and fails the rest for good", () => {
    const codes = [...new Set([...Object.values(EXIT), KILLED])].filter((c) => c !== EXIT.ok).sort((a, b) => a - b);
    const script = [
      "import json, sys",
      `sys.path.insert(0, ${JSON.stringify(STAND_INS)})`,
      "import run_task",
      `dag = run_task.load_dag_module(${JSON.stringify(DAG_FILE)}, None)`,
      "ends = {}",
      `for code in ${JSON.stringify(codes)}:`,
      "    try:",
      "        dag.fail_by_exit_code(code, 'shard')",
      "        ends[code] = 'returned'",
      "    except Exception as error:",
      "        ends[code] = type(error).__name__",
      "print(json.dumps(ends))",
    ].join("\n");
    const r = spawnSync(PYTHON, ["-c", script], { encoding: "utf8", env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1" } });
    expect(r.status, r.stderr).toBe(0);
    const ends = JSON.parse(r.stdout) as Record<string, string>;
    const rules = podFailureRules();
    for (const code of codes) {
      const k8s = podFailureAction(rules, { exitCodes: [{ container: "shard", code }], conditions: [] });
      const expected = code === EXIT.noInput ? "AirflowSkipException" : k8s === "Count" ? "AirflowException" : "AirflowFailException";
      expect(ends[code], `exit ${code} (Kubernetes: ${k8s})`).toBe(expected);
      if (k8s === "Count") expect(RESUMABLE.has(code as never) || code === KILLED, `exit ${code}`).toBe(true);
    }
  });

  // SOAK (45 s): the backstop. typed-eval frozen (SIGSTOP) when the task is killed: the DAG kills it once its grace and margin are out.
  it.skipIf(!SOAK)(
    "the worker form, typed-eval not ending after a stop: killed once GRACE_S + STOP_MARGIN_S (45 s) are out, before Airflow's own SIGKILL at 60 s",
    async () => {
      let supervisor = 0;
      const sent = endpoint.bodies.length;
      // Shard 4, whose pod was killed -9 above: this run takes its lock over (same host, holder gone) and resumes.
      const run = runTask("typed_eval_triage_bash", "shard_4_of_4", night.day.local, (pid) => (supervisor = pid));
      await until(run, () => endpoint.bodies.length > sent, "shard_4_of_4's first request");
      const [pid] = typedEvalUnder(supervisor);
      expect(pid, "the typed-eval process of the task").toBeDefined();
      process.kill(pid as number, "SIGSTOP");
      const killedAt = performance.now();
      process.kill(supervisor, "SIGTERM");
      const { end, stdout, stderr } = await run;
      const seconds = (performance.now() - killedAt) / 1000;
      expect(end.state, stderr).toBe("up_for_retry");
      expect(stdout).toMatch(/asked to stop; waiting up to 45 s\n.*typed-eval ended with exit 137/);
      expect(seconds).toBeGreaterThanOrEqual(45);
      expect(seconds).toBeLessThan(60);
    },
    120_000,
  );
});
