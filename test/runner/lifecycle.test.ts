/**
 * The run lifecycle in-process, with storage and endpoint faults injected
 * through its seams (the journal's store, the output targets, the
 * evaluator): each fault ends in its verdict and exit code, the summary
 * says so, nothing is left that blocks a rerun, and the rerun ends with
 * every id exactly once.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { UpstreamUnavailableError } from "../../src/api/errors.js";
import { createLogger } from "../../src/logging/logger.js";
import type { OutputTarget } from "../../src/runner/output/outputs.js";
import { targetOf } from "../../src/runner/prepare.js";
import { type OpenJournal, type RunInvocation, runLifecycle } from "../../src/runner/run.js";
import { Journal } from "../../src/runner/state/journal.js";
import { acquireLock } from "../../src/runner/state/lock.js";
import { exitCodeOf, VERDICTS, verdictLine } from "../../src/api/verdict.js";
import { runInProcess } from "../support/cli.js";
import { answer, FakeEvaluator } from "../support/fake-evaluator.js";
import { canMountTmpfs, lifecycleRequest } from "../support/lifecycle.js";

const dir = mkdtempSync(join(tmpdir(), "te-lifecycle-"));
const jobFile = join(dir, "job.json");
writeFileSync(jobFile, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
const _logger = createLogger({ level: "silent" });
const N = 40;

function input(name: string, n = N): string {
  const path = join(dir, `${name}.jsonl`);
  writeFileSync(path, Array.from({ length: n }, (_, i) => JSON.stringify({ id: `${name}${i}`, text: `record ${i}` })).join("\n"));
  return path;
}

function request(data: string, output: string, evaluator: FakeEvaluator, over: Partial<RunInvocation> = {}): RunInvocation {
  return lifecycleRequest(data, jobFile, output, evaluator, { maxFailuresInARow: 5, ...over });
}

const ids = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { id: string }).id);
const summaryOf = (output: string) => JSON.parse(readFileSync(`${output}.summary.json`, "utf8")) as { verdict: string; status: string; reason: string };

/** A journal whose disk fills after `after` entries: every append then fails with ENOSPC, as a full disk does. */
function fillingJournal(after: number): OpenJournal {
  return async (path, options) => {
    const opened = await Journal.open(path, options);
    let n = 0;
    const journal = {
      append: (entry: Parameters<Journal["append"]>[0]) => {
        if (++n > after) throw Object.assign(new Error(`ENOSPC: no space left on device, write`), { code: "ENOSPC", path });
        return opened.journal.append(entry);
      },
      close: () => opened.journal.close(),
    };
    return { ...opened, journal };
  };
}

/** An output target whose folder refuses the final rename (its permissions changed mid-run). */
function refusingTarget(location: string): OutputTarget {
  if (!location.endsWith(".out.jsonl")) return targetOf(location);
  return {
    describe: location,
    open: () => ({
      // The rows go somewhere; the rename into the folder (made read-only meanwhile) is refused.
      write: async () => undefined,
      commit: async () => {
        throw Object.assign(new Error(`EACCES: permission denied, rename '${location}.partial'`), { code: "EACCES", path: location });
      },
      abort: async () => undefined,
    }),
  };
}

/** Reruns with nothing injected: the run completes with every id exactly once. */
async function rerunCompletes(name: string, data: string, output: string): Promise<FakeEvaluator> {
  const evaluator = new FakeEvaluator();
  const end = await runLifecycle(request(data, output, evaluator));
  expect(end.verdict).toBe("done");
  expect(ids(output).sort()).toEqual(Array.from({ length: N }, (_, i) => `${name}${i}`).sort());
  expect(existsSync(`${output}.journal.lock`)).toBe(false);
  return evaluator;
}

const canMount = canMountTmpfs;

describe("run lifecycle verdicts", () => {
  it.runIf(canMount())("storage-unavailable (exit 9) on a real full disk (a 64 KiB tmpfs); once space is freed the rerun completes", async () => {
    const disk = mkdtempSync(join(tmpdir(), "te-full-"));
    expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", disk]).status).toBe(0);
    try {
      const data = input("t", 600);
      const output = join(disk, "t.out.jsonl");
      const end = await runLifecycle(request(data, output, new FakeEvaluator(), { places: { output, summaryJson: join(dir, "t.summary.json") } }));
      expect(end.verdict).toBe("storage-unavailable");
      expect(end.reason).toMatch(/no space left/);
      expect(JSON.parse(readFileSync(join(dir, "t.summary.json"), "utf8"))).toMatchObject({ verdict: "storage-unavailable" });
      expect(existsSync(`${output}.journal.lock`)).toBe(false);
      const kept = readFileSync(`${output}.journal`, "utf8")
        .split("\n")
        .filter((l) => l.includes('"k":"answer"')).length;
      expect(kept).toBeGreaterThan(0);
      expect(spawnSync("mount", ["-o", "remount,size=16m", disk]).status).toBe(0);
      const rerun = new FakeEvaluator();
      const again = await runLifecycle(request(data, output, rerun, { places: { output } }));
      expect(again.verdict).toBe("done");
      expect(new Set(ids(output)).size).toBe(600);
      expect(ids(output)).toHaveLength(600);
      // Only what the journal did not keep (and at most the records in flight) is paid again.
      expect(rerun.calls.length).toBeLessThanOrEqual(600 - kept + 4);
    } finally {
      spawnSync("umount", [disk]);
    }
  });

  it.runIf(canMount())(
    "a disk that fills before the final write (a 64 KiB tmpfs): exit 9, never done with an empty file in place; the rerun asks nothing",
    async () => {
      const disk = mkdtempSync(join(tmpdir(), "te-fills-"));
      expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", disk]).status).toBe(0);
      try {
        const data = input("u", 30);
        const output = join(disk, "u.out.jsonl");
        const summaryJson = join(disk, "u.summary.json");
        const journal = join(dir, "u.journal");
        const filler = join(disk, "filler");
        // The disk has room at the check; something else fills it while the records are answered.
        const filling = new FakeEvaluator((r, call) => {
          if (call === 5) {
            try {
              for (let i = 0; i < 64; i++) writeFileSync(filler, Buffer.alloc(4096), { flag: "a" });
            } catch {
              // Full.
            }
          }
          return answer(r);
        });
        const end = await runLifecycle(request(data, output, filling, { places: { output, summaryJson, journal } }));
        expect(end.verdict).toBe("storage-unavailable");
        expect(VERDICTS[end.verdict].exit()).toBe(9);
        // The line names the output and so the disk (it said "no space left on the device: free some space").
        expect(end.reason).toMatch(/no space left on the device holding .*\/u\.out\.jsonl: free some space/);
        expect(existsSync(output)).toBe(false);
        expect(existsSync(`${output}.partial`)).toBe(false);
        spawnSync("rm", ["-f", filler]);
        const rerun = new FakeEvaluator();
        const again = await runLifecycle(request(data, output, rerun, { places: { output, summaryJson, journal } }));
        expect(again.verdict).toBe("done");
        expect(rerun.calls).toHaveLength(0);
        expect(ids(output)).toHaveLength(30);
        expect(JSON.parse(readFileSync(summaryJson, "utf8"))).toMatchObject({ verdict: "done" });
      } finally {
        spawnSync("umount", [disk]);
      }
    },
  );

  it("done: every id once, the summary says done", async () => {
    const data = input("a");
    const output = join(dir, "a.out.jsonl");
    await rerunCompletes("a", data, output);
    expect(summaryOf(output)).toMatchObject({ verdict: "done", status: "done" });
  });

  it("storage-unavailable (exit 9): the disk fills mid-run; the journal keeps what finished and the rerun pays only the rest", async () => {
    const data = input("b");
    const output = join(dir, "b.out.jsonl");
    const first = new FakeEvaluator();
    const end = await runLifecycle(request(data, output, first, { openJournal: fillingJournal(15) }));
    expect(end.verdict).toBe("storage-unavailable");
    expect(VERDICTS[end.verdict].exit()).toBe(9);
    expect(summaryOf(output)).toMatchObject({ verdict: "storage-unavailable" });
    expect(summaryOf(output).reason).toMatch(/no space left/);
    expect(existsSync(output)).toBe(false);
    const rerun = await rerunCompletes("b", data, output);
    // 14 records journaled (the input entry took one append): at most those in flight are paid again.
    expect(rerun.calls.length).toBeLessThanOrEqual(N - 14 + 4);
  });

  it("storage-unavailable (exit 9): the output's folder refuses the final write; the rerun writes it without asking the model", async () => {
    const data = input("c");
    const output = join(dir, "c.out.jsonl");
    const end = await runLifecycle(request(data, output, new FakeEvaluator(), { target: refusingTarget }));
    expect(end.verdict).toBe("storage-unavailable");
    expect(summaryOf(output)).toMatchObject({ verdict: "storage-unavailable" });
    const rerun = await rerunCompletes("c", data, output);
    expect(rerun.calls.length).toBe(0);
  });

  it("bad-input (exit 2) before paying anything: the output is a directory, or its .partial is", async () => {
    const data = input("d");
    const adir = join(dir, "adir");
    mkdirSync(adir, { recursive: true });
    const evaluator = new FakeEvaluator();
    const end = await runLifecycle(request(data, adir, evaluator, { places: { output: adir, summaryJson: join(dir, "d.summary.json") } }));
    expect(end.verdict).toBe("bad-input");
    expect(VERDICTS[end.verdict].exit()).toBe(2);
    expect(end.reason).toMatch(/is a directory/);
    expect(JSON.parse(readFileSync(join(dir, "d.summary.json"), "utf8"))).toMatchObject({ verdict: "bad-input" });
    const output = join(dir, "d.out.jsonl");
    mkdirSync(`${output}.partial`);
    const partial = await runLifecycle(request(data, output, evaluator));
    expect(partial.verdict).toBe("bad-input");
    expect(partial.reason).toMatch(/\.partial is a directory/);
    expect(evaluator.calls.length).toBe(0);
  });

  it("bad-input (exit 2): a corrupt .gz stops at the check, nothing paid", async () => {
    const data = join(dir, "e.jsonl.gz");
    writeFileSync(data, Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), Buffer.alloc(2000, 7)]));
    const output = join(dir, "e.out.jsonl");
    const evaluator = new FakeEvaluator();
    const end = await runLifecycle(request(data, output, evaluator));
    expect(end.verdict).toBe("bad-input");
    expect(end.reason).toMatch(/not valid gzip/);
    expect(summaryOf(output)).toMatchObject({ verdict: "bad-input" });
    expect(evaluator.calls.length).toBe(0);
  });

  it("locked (exit 7): refused while another run holds the journal, with a summary; then the run goes through", async () => {
    const data = input("f");
    const output = join(dir, "f.out.jsonl");
    const other = acquireLock(`${output}.journal.lock`);
    // Taken by this process: the lock names a live pid, so it is not stale.
    const held = JSON.parse(readFileSync(`${output}.journal.lock`, "utf8")) as { pid: number };
    writeFileSync(`${output}.journal.lock`, JSON.stringify({ ...held, pid: process.ppid }));
    const end = await runLifecycle(request(data, output, new FakeEvaluator()));
    expect(end.verdict).toBe("locked");
    expect(VERDICTS[end.verdict].exit()).toBe(7);
    expect(summaryOf(output)).toMatchObject({ verdict: "locked" });
    writeFileSync(`${output}.journal.lock`, JSON.stringify(held));
    await other.release();
    await rerunCompletes("f", data, output);
  });

  it.each([
    ["garbage", "\u0000\u0000garbage from a disk that failed"],
    ["an empty file", ""],
  ])(
    "locked (exit 7) by a lock file that names no run (%s): the line says to delete it, naming it, not to wait for it to expire (it never would)",
    async (_what, text) => {
      const name = `garbage-lock-${text.length}`;
      const data = input(name);
      const output = join(dir, `${name}.out.jsonl`);
      const lock = `${output}.journal.lock`;
      writeFileSync(lock, text);
      const evaluator = new FakeEvaluator();
      const end = await runLifecycle(request(data, output, evaluator));
      expect(end.verdict).toBe("locked");
      expect(exitCodeOf(end)).toBe(7);
      expect(end.reason).toBe(`${lock} is in the way of this run's lock, but names no run (it is empty, or not a lock typed-eval wrote)`);
      const line = verdictLine(end);
      expect(line).toContain(`Next: if no run of this job is going, delete ${lock} (no run holds it, so it never goes by itself), then rerun. Exit 7.`);
      expect(line).not.toMatch(/expire|wait/);
      expect(evaluator.calls).toHaveLength(0);
      // Left as it was: this run cannot know it is garbage and not a run's.
      expect(readFileSync(lock, "utf8")).toBe(text);
      rmSync(lock);
      await rerunCompletes(name, data, output);
    },
  );

  it("aborted (exit 3): the endpoint down for good; the rerun against it back completes", async () => {
    const data = input("g");
    const output = join(dir, "g.out.jsonl");
    const down = new FakeEvaluator(() => {
      throw new UpstreamUnavailableError("connection refused");
    });
    const end = await runLifecycle(request(data, output, down));
    expect(end.verdict).toBe("aborted");
    expect(VERDICTS[end.verdict].exit()).toBe(3);
    expect(summaryOf(output)).toMatchObject({ verdict: "aborted" });
    expect(existsSync(`${output}.journal.lock`)).toBe(false);
    await rerunCompletes("g", data, output);
  });

  it("internal-error (exit 70): an unforeseen failure is a bug with its own code, the summary written, the lock released", async () => {
    const data = input("h");
    const output = join(dir, "h.out.jsonl");
    const broken: OpenJournal = async () => {
      throw new TypeError("cannot read properties of undefined");
    };
    const end = await runLifecycle(request(data, output, new FakeEvaluator(), { openJournal: broken }));
    expect(end.verdict).toBe("internal-error");
    expect(VERDICTS[end.verdict].exit()).toBe(70);
    expect(summaryOf(output)).toMatchObject({ verdict: "internal-error", reason: "cannot read properties of undefined" });
    await rerunCompletes("h", data, output);
  });

  it("bad-input at the check: a remote endpoint with no API key, unless --no-api-key", async () => {
    const data = input("i", 3);
    const output = join(dir, "i.out.jsonl");
    const settings = {
      input: data,
      jobFile,
      model: "default",
      apiKeyEnv: "TE_LIFECYCLE_NO_SUCH_KEY",
      timeoutSeconds: 1,
      seed: 1,
      baseUrl: "http://127.0.0.1:9",
    };
    const end = await runLifecycle(request(data, output, new FakeEvaluator(), { settings }));
    expect(end.verdict).toBe("bad-input");
    expect(end.reason).toMatch(/TE_LIFECYCLE_NO_SUCH_KEY is not set.*--no-api-key/);
    const allowed = await runLifecycle(request(data, output, new FakeEvaluator(), { settings: { ...settings, noApiKey: true }, maxFailuresInARow: 1 }));
    // Past the check: the endpoint (nothing listens) is what fails now.
    expect(allowed.verdict).toBe("aborted");
  });

  it("all-failed names the reason however few the records", async () => {
    const data = join(dir, "j.jsonl");
    writeFileSync(data, `${JSON.stringify({ id: "j0", nottext: 1 })}\n${JSON.stringify({ id: "j1", nottext: 2 })}\n`);
    const output = join(dir, "j.out.jsonl");
    const end = await runLifecycle(request(data, output, new FakeEvaluator()));
    expect(end.verdict).toBe("all-failed");
    expect(end.reason).toMatch(/all 2 records failed for the same reason/);
    expect(summaryOf(output).reason).toMatch(/same reason/);
  });

  it("aborted (exit 3, resumable) when the model's download host does not answer: a scheduler retries it; the summary says so", async () => {
    const data = input("k", 3);
    const output = join(dir, "k.out.jsonl");
    const r = await runInProcess(["run", data, "--job", jobFile, "-o", output, "--summary-json", `${output}.summary.json`], {
      TYPED_EVAL_MODELS_DIR: mkdtempSync(join(tmpdir(), "te-no-models-")),
      HF_ENDPOINT: "http://127.0.0.1:9",
      TYPED_EVAL_LOG_LEVEL: "silent",
    });
    expect(r.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:9\/.*Rerun once it answers/);
    expect(r.code).toBe(VERDICTS.aborted.exit());
    expect(summaryOf(output).verdict).toBe("aborted");
    expect(existsSync(`${output}.journal.lock`)).toBe(false);
  });
});
