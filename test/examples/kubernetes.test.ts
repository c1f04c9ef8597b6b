/**
 * examples/schedulers/kubernetes.yaml without a cluster: the manifest is
 * checked against the Kubernetes API schema (kubernetes-models, generated
 * from the upstream OpenAPI) and against the rules the API server adds for
 * these fields; its podFailurePolicy is applied to every exit code of the
 * table; and both containers' command lines, with $(VAR) expanded as the
 * kubelet does, run as written (no path rewritten, /state and /usr/local/bin
 * mounted in a private namespace) against a local S3-compatible server and a
 * local endpoint.
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CronJob } from "kubernetes-models/batch/v1/CronJob";
import type { IContainer } from "kubernetes-models/v1/Container";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { EXIT, KILLED, RESUMABLE } from "../../src/api/exit-codes.js";
import { expandVars, type PodFailureRule, podFailureAction } from "../support/kubernetes.js";
import { canUnshare, runMounted } from "../support/namespace.js";
import { EXAMPLES, type Night, ROOT, startNight, ticketCount } from "../support/night.js";

const text = readFileSync(join(EXAMPLES, "kubernetes.yaml"), "utf8");
const docs = parseAllDocuments(text).map((d) => d.toJS() as Record<string, unknown>);
const cron = new CronJob(docs[0] as never);
const job = cron.spec?.jobTemplate.spec;
const pod = job?.template.spec;
const rules = (job?.podFailurePolicy?.rules ?? []) as PodFailureRule[];
const shard = pod?.initContainers?.find((c) => c.name === "shard") as IContainer;
const gate = pod?.containers.find((c) => c.name === "drift-gate") as IContainer;

describe("examples/schedulers/kubernetes.yaml", () => {
  it("is one CronJob, valid against the Kubernetes API schema (and a broken copy is not)", () => {
    expect(docs).toHaveLength(1);
    expect(docs[0]).toMatchObject({ apiVersion: "batch/v1", kind: "CronJob" });
    expect(() => cron.validate()).not.toThrow();
    const broken = structuredClone(docs[0]) as { spec: { jobTemplate: { spec: { podFailurePolicy: { rules: { action: string }[] } } } } };
    (broken.spec.jobTemplate.spec.podFailurePolicy.rules[0] as { action: string }).action = "Retry";
    expect(() => new CronJob(broken as never).validate()).toThrow(/action must be equal to one of the allowed values/);
  });

  it("keeps the rules the API server adds: an Indexed Job, pods never restarted, per-index retries, exit code lists ordered without 0", () => {
    expect(job).toMatchObject({ completionMode: "Indexed", backoffLimitPerIndex: expect.any(Number) });
    expect(pod?.restartPolicy).toBe("Never");
    expect(job?.parallelism).toBeLessThanOrEqual(job?.completions as number);
    // The shard count the script passes to --shard is the number of indexes.
    expect(shard.env?.find((e) => e.name === "SHARDS")?.value).toBe(String(job?.completions));
    for (const rule of rules) {
      const values = rule.onExitCodes?.values;
      if (values === undefined) continue;
      expect(values).toEqual([...new Set(values)].sort((a, b) => a - b));
      expect(values.length).toBeLessThanOrEqual(255);
      if (rule.onExitCodes?.operator === "In") expect(values).not.toContain(0);
    }
    // tini stays PID 1 and typed-eval is exec'd as its only child, so SIGTERM reaches the runner.
    for (const c of [shard, gate]) {
      expect(c.command).toEqual(["/usr/bin/tini", "--", "/bin/sh", "-c"]);
      expect(c.args?.[0]).toMatch(/&& exec typed-eval (run|report) /);
    }
    expect(pod?.terminationGracePeriodSeconds).toBeGreaterThan(30);
  });

  it("states its minimum Kubernetes version, as docs/scheduling.md does", () => {
    expect(text).toMatch(/^# Kubernetes 1\.33 or later/m);
    expect(readFileSync(join(ROOT, "docs/scheduling.md"), "utf8")).toMatch(/Kubernetes\s+1\.33 or later/);
  });

  it("docs/scheduling.md's table of its actions lists the codes the policy acts on", () => {
    const docs = readFileSync(join(ROOT, "docs/scheduling.md"), "utf8");
    const table = docs.slice(docs.indexOf("| what ended the pod | action |"));
    const codesOf = (action: string) =>
      /^\| ([\d, ]+) \(/m
        .exec(table.split("\n").find((row) => row.includes(`| \`${action}\``)) ?? "")?.[1]
        ?.split(", ")
        .map(Number);
    expect(codesOf("Count")).toEqual(rules.find((r) => r.action === "Count")?.onExitCodes?.values);
    expect(codesOf("FailIndex")).toEqual(rules.find((r) => r.action === "FailIndex")?.onExitCodes?.values);
  });

  it("its podFailurePolicy, for every exit code of the table from either container: RESUMABLE retried (counted), the rest fail the index at once", () => {
    const actions: Record<string, string> = {};
    for (const code of new Set(Object.values(EXIT))) {
      if (code === EXIT.ok) continue;
      const expected = RESUMABLE.has(code) ? "Count" : "FailIndex";
      // The shard failing stops the pod before the gate; the gate fails after a shard that exited 0.
      const byShard = podFailureAction(rules, { exitCodes: [{ container: "shard", code }], conditions: [] });
      const byGate = podFailureAction(rules, {
        exitCodes: [
          { container: "shard", code: 0 },
          { container: "drift-gate", code },
        ],
        conditions: [],
      });
      expect([byShard, byGate], `exit ${code}`).toEqual([expected, expected]);
      actions[code] = byShard;
    }
    expect(actions).toMatchObject({ 3: "Count", 6: "FailIndex", 4: "FailIndex", 143: "Count" });
    // A pod the cluster stopped (evicted, drained: SIGTERM, exit 143) is not counted; one killed outright (137: out of memory) is, by its rule.
    expect(podFailureAction(rules, { exitCodes: [{ container: "shard", code: 143 }], conditions: ["DisruptionTarget"] })).toBe("Ignore");
    expect(podFailureAction(rules, { exitCodes: [{ container: "shard", code: KILLED }], conditions: [] })).toBe("Count");
    expect(rules.find((r) => r.action === "Count")?.onExitCodes?.values).toContain(KILLED);
  });

  it("expands $(VAR) as the kubelet does", () => {
    const vars = { A: "1", B: "x y" };
    expect(expandVars("$(A)-$(B)", vars)).toBe("1-x y");
    expect(expandVars("$$(A) $$((A + 1)) $((A + 1)) $(C) $A $(", vars)).toBe("$(A) $((A + 1)) $((A + 1)) $(C) $A $(");
  });
});

if (!canUnshare) {
  process.stderr.write(
    "\n*** SKIPPED the Kubernetes example's containers run as written: no private mount namespace here (root and `unshare --mount`) ***\n\n",
  );
}

describe.skipIf(!canUnshare)("examples/schedulers/kubernetes.yaml, its containers run", () => {
  let night: Night;

  beforeAll(async () => {
    night = await startNight("te-kubernetes-");
  }, 120_000);

  afterAll(async () => {
    await night?.close();
  });

  /** A container's command line and environment as the kubelet builds them for index `index`; BASE_URL is the site's endpoint. */
  function line(c: IContainer, index: number): { argv: string[]; env: Record<string, string> } {
    const env: Record<string, string> = { JOB_COMPLETION_INDEX: String(index) };
    for (const e of c.env ?? []) {
      const secret = e.valueFrom?.secretKeyRef;
      if (secret) expect(`${secret.name}/${secret.key}`).toBe("typed-eval-api/key");
      env[e.name] = e.name === "BASE_URL" ? night.api.url : secret ? night.key : expandVars(e.value ?? "", env);
    }
    return { argv: [...(c.command ?? []), ...(c.args ?? [])].map((a) => expandVars(a, env)), env };
  }

  /** Runs a container of index 3 as its image would: PID 1 is tini (not here: what it runs is), WORKDIR /state, the pod's S3 identity. */
  async function run(c: IContainer) {
    const { argv, env } = line(c, 3);
    expect(argv.slice(0, 2)).toEqual(["/usr/bin/tini", "--"]);
    const image = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOME: night.dir, TYPED_EVAL_MODELS_DIR: "/models" };
    return runMounted({ "/state": state, "/usr/local/bin": night.binDir }, argv.slice(2), { cwd: "/state", env: { ...image, ...night.s3Env, ...env } });
  }
  let state: string;

  it("index 3 answers shard 4/4 into S3; its gate fails the index on the first night (no last night), passes once last night is there", async () => {
    state = join(night.dir, "state");
    mkdirSync(state);
    const { utc: day } = night.day;
    const r = await run(shard);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.code, r.stderr).toBe(0);
    const rows = await night.rows(`answers/${day}/part-4.jsonl`);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.length).toBeLessThan(ticketCount);
    // The first night: no last night to compare with. Exit 2, and the policy fails the index.
    let g = await run(gate);
    expect(g.code, g.stderr).toBe(2);
    expect(g.stderr).toMatch(new RegExp(`cannot read --compare s3://acme-support/answers/${night.yesterday.utc}/part-4\\.jsonl: no such key`));
    expect(
      podFailureAction(rules, {
        exitCodes: [
          { container: "shard", code: 0 },
          { container: "drift-gate", code: g.code as number },
        ],
        conditions: [],
      }),
    ).toBe("FailIndex");
    await night.putLastNight(`answers/${day}/part-4.jsonl`, `answers/${night.yesterday.utc}/part-4.jsonl`, false);
    g = await run(gate);
    expect(g.code, g.stderr).toBe(0);
    expect(readFileSync(join(state, `drift-${day}-part-4.html`), "utf8")).toMatch(/<html/i);
  }, 120_000);
});
