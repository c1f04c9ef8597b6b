/**
 * Which exit codes a scheduler retries lives in one place, `RESUMABLE`: the
 * exit-code table of docs/scheduling.md, the Airflow DAG, the crontab and the
 * Kubernetes Job's podFailurePolicy say the same, and the table has a row for
 * every code of `EXIT` (so a code added later is documented and acted on).
 * 137 (`KILLED`: killed outright, not a verdict) has its row too, and the DAG
 * and the Job retry it alike.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { EXIT, KILLED, RESUMABLE } from "../../src/api/exit-codes.js";
import { verdictLine } from "../../src/api/verdict.js";

const ROOT = join(import.meta.dirname, "../..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");
const sorted = (codes: Iterable<number>) => [...codes].sort((a, b) => a - b);
const ALL = sorted(new Set(Object.values(EXIT)));
/** What the DAG and the Kubernetes Job retry: the resumable codes and a run killed outright. */
const RETRIED = sorted([...RESUMABLE, KILLED]);

/** The rows of docs/scheduling.md's exit-code table: each row's codes and its "scheduler retries" cell. */
function docsTable(): { codes: number[]; retries: string }[] {
  const text = read("docs/scheduling.md");
  const start = text.indexOf("| code | verdict |");
  expect(start, "docs/scheduling.md has the exit-code table").toBeGreaterThan(-1);
  const [header, , ...rows] = text.slice(start, text.indexOf("\n\n", start)).split("\n");
  const cells = (row: string) =>
    row
      .split("|")
      .slice(1, -1)
      .map((c) => c.trim());
  const column = cells(header as string).indexOf("scheduler retries");
  expect(column, "a 'scheduler retries' column").toBeGreaterThan(-1);
  return rows.map((row) => ({ codes: (cells(row)[0] as string).split("/").map((c) => Number(c.trim())), retries: cells(row)[column] as string }));
}

describe("exit codes a scheduler retries", () => {
  it("RESUMABLE is a subset of EXIT without success", () => {
    for (const code of RESUMABLE) expect(ALL).toContain(code);
    expect(RESUMABLE.has(EXIT.ok)).toBe(false);
  });

  it("a lost lock (8) is resumable, and its line says to rerun: a lone run whose clock jumped has no other run to finish the job", () => {
    expect(RESUMABLE.has(EXIT.lockLost)).toBe(true);
    const line = verdictLine({ verdict: "lock-lost", reason: "the lock's lease ran out while the run was stalled" });
    expect(line).toMatch(/Next: rerun: it resumes from the journal, or exits 7 while another run holds the lock/);
    expect(line).not.toMatch(/the run that took over finishes/);
  });

  it("docs/scheduling.md's table has every code of EXIT and 137, and says 'yes' to retrying exactly the RESUMABLE ones and 137", () => {
    const rows = docsTable();
    expect(sorted(rows.flatMap((r) => r.codes))).toEqual(sorted([...ALL, KILLED]));
    for (const row of rows) {
      for (const code of row.codes) expect(/\byes\b/.test(row.retries), `code ${code}: "${row.retries}"`).toBe(RETRIED.includes(code));
    }
  });

  it("the Airflow DAG retries RESUMABLE and KILLED, and nothing else", () => {
    const dag = read("examples/schedulers/airflow_dag.py");
    const set = /^RESUMABLE = \{([\d, ]+)\}$/m.exec(dag)?.[1];
    expect(set).toBeDefined();
    expect(sorted((set as string).split(",").map(Number))).toEqual(sorted(RESUMABLE));
    expect(/^KILLED = (\d+)$/m.exec(dag)?.[1]).toBe(String(KILLED));
  });

  it("the crontab names RESUMABLE as the codes whose rerun goes on", () => {
    const comments = read("examples/schedulers/crontab")
      .split("\n")
      .filter((l) => l.startsWith("#"))
      .map((l) => l.replace(/^#\s*/, ""))
      .join(" ");
    const listed = /Resumable \([^)]*\):\s*([\d, ]+?)\s*\(/.exec(comments)?.[1];
    expect(listed).toBeDefined();
    expect(sorted((listed as string).split(",").map(Number))).toEqual(sorted(RESUMABLE));
  });

  it("the crontab's flock gives a night that overlaps the last the code of locked (7), which its legend says: flock's own 1 read as 'too many failed records'", () => {
    const crontab = read("examples/schedulers/crontab");
    const line = crontab.split("\n").find((l) => /^\S+ \S+ \S+ \S+ \S+ /.test(l) && !l.startsWith("#")) ?? "";
    const conflict = /flock -n -E (\d+) /.exec(line)?.[1];
    expect(conflict, "the job line runs flock -n -E <code>").toBeDefined();
    expect(Number(conflict)).toBe(EXIT.locked);
    const legend = crontab
      .split("\n")
      .filter((l) => l.startsWith("#"))
      .join(" ");
    expect(legend).toMatch(new RegExp(`\\b${EXIT.locked} locked \\(the night before still running: flock -E ${EXIT.locked}`));
    // flock itself, as the line runs it, with the lock held by another process: the conflict exits with that code.
    const dir = mkdtempSync(join(tmpdir(), "te-flock-"));
    const file = join(dir, "triage.flock");
    // One process holding the lock itself (exec'd sleep keeps the locked descriptor): killing it releases the lock.
    const holder = spawn("/bin/sh", ["-c", 'exec 9>"$0"; flock 9; exec sleep 30', file], { stdio: "ignore" });
    try {
      for (let i = 0; i < 100 && spawnSync("flock", ["-n", file, "true"]).status === 0; i++) spawnSync("sleep", ["0.05"]);
      expect(spawnSync("/bin/sh", ["-c", `flock -n -E ${conflict} ${file} true`]).status).toBe(EXIT.locked);
    } finally {
      holder.kill();
    }
  });

  it("the Kubernetes Job counts RESUMABLE and KILLED as retries and fails the index at once on every other code of EXIT", () => {
    const cron = parse(read("examples/schedulers/kubernetes.yaml")) as {
      spec: { jobTemplate: { spec: { podFailurePolicy: { rules: { action: string; onExitCodes?: { operator: string; values: number[] } }[] } } } };
    };
    const rules = cron.spec.jobTemplate.spec.podFailurePolicy.rules;
    const values = (action: string) => rules.find((r) => r.action === action && r.onExitCodes?.operator === "In")?.onExitCodes?.values;
    expect(values("Count")).toEqual(RETRIED);
    expect(values("FailIndex")).toEqual(ALL.filter((c) => c !== EXIT.ok && !(RESUMABLE as ReadonlySet<number>).has(c)));
  });
});
