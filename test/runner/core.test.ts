/** The runner's small modules in-process: the bounded loop, dedup, how a run ends, the journal lock. */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Dedup, Lru } from "../../src/runner/state/dedup.js";
import { acquireLock, LockedError } from "../../src/runner/state/lock.js";
import { forEachBounded, type LoopHooks } from "../../src/runner/send/loop.js";
import { RecordWatch } from "../../src/runner/send/watch.js";
import { AllFailedError, decide, EndpointAbort, type RunFacts } from "../../src/api/verdict.js";
import { answer } from "../support/fake-evaluator.js";

async function* numbers(n: number, onRead?: (i: number) => void): AsyncGenerator<number> {
  for (let i = 0; i < n; i++) {
    onRead?.(i);
    yield i;
  }
}

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The loop's hooks around a task per item; `halt` may be aborted by the test. */
function hooks<T>(task: (item: T) => Promise<void>, over: Partial<LoopHooks<T>> = {}): LoopHooks<T> {
  return { halt: new AbortController().signal, take: (item) => () => task(item), onTaskError: () => undefined, onSourceError: () => undefined, ...over };
}

describe("forEachBounded", () => {
  it("runs at most `concurrency` at once, reads at most 2 x concurrency ahead, and records the input's end", async () => {
    let read = 0;
    let running = 0;
    let most = 0;
    let mostAhead = 0;
    let finished = 0;
    const end = await forEachBounded(
      numbers(200, () => read++),
      4,
      hooks(async () => {
        most = Math.max(most, ++running);
        mostAhead = Math.max(mostAhead, read - finished);
        await tick(1);
        running--;
        finished++;
      }),
    );
    expect(end).toEqual({ inputEnded: true });
    expect(finished).toBe(200);
    expect(most).toBe(4);
    expect(mostAhead).toBeLessThanOrEqual(9);
  });

  it("a halt reads no more and starts nothing queued; the tasks running are left to finish; the input's end is not reached", async () => {
    const halt = new AbortController();
    const taken: number[] = [];
    const started: number[] = [];
    const done: number[] = [];
    const end = await forEachBounded(numbers(1000), 3, {
      ...hooks(async () => undefined),
      halt: halt.signal,
      take: (i) => {
        taken.push(i);
        return async () => {
          started.push(i);
          if (i === 5) halt.abort();
          await tick(20);
          done.push(i);
        };
      },
    });
    expect(end).toEqual({ inputEnded: false });
    expect(started.length).toBeLessThan(12);
    // Taken but never started: the records a stop leaves without a result (the run is then not done).
    expect(taken.length).toBeGreaterThan(started.length);
    expect(done.sort((a, b) => a - b)).toEqual(started.sort((a, b) => a - b));
  });

  it("the input's end reached with queued tasks, then a halt: the end is recorded, and the queued tasks never start", async () => {
    const halt = new AbortController();
    const started: number[] = [];
    const end = await forEachBounded(numbers(6), 4, {
      ...hooks(async (i: number) => {
        started.push(i);
        if (i === 0) setTimeout(() => halt.abort(), 5);
        await tick(20);
      }),
      halt: halt.signal,
    });
    expect(end).toEqual({ inputEnded: true });
    expect(started).toEqual([0, 1, 2, 3]);
  });

  it("a failing input is reported before the tasks in hand settle", async () => {
    async function* broken(): AsyncGenerator<number> {
      yield 1;
      throw new Error("bad gzip");
    }
    const calls: string[] = [];
    const end = await forEachBounded(
      broken(),
      2,
      hooks(async () => void calls.push("task"), { onSourceError: () => void calls.push("source") }),
    );
    expect(end).toEqual({ inputEnded: false });
    expect(calls).toContain("source");
  });
});

describe("Dedup", () => {
  const request = { model: "m", state: "s", questions: { ok: { type: "noul" as const } } };
  const answered = (labelMass?: Record<string, number>) => ({ ok: true as const, evaluation: { ...answer(request), ...(labelMass ? { labelMass } : {}) } });

  it("copies an answered request and shares one in flight, naming the original by id with its label mass", async () => {
    const dedup = new Dedup(2);
    let sends = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const send = async () => {
      sends++;
      await gate;
      return answered({ ok: 0.93 });
    };
    const first = dedup.answer("h", "r3", send);
    const twin = dedup.answer("h", "r9", send);
    release();
    const [a, b] = await Promise.all([first, twin]);
    expect(sends).toBe(1);
    expect(a.copyOf).toBeUndefined();
    expect(b.copyOf).toBe("r3");
    if (!a.outcome.ok || !b.outcome.ok) throw new Error("expected answers");
    expect(a.outcome.evaluation.response.usage.input_tokens).toBeGreaterThan(0);
    expect(b.outcome.evaluation.response.usage).toEqual({ input_tokens: 0, output_tokens: 0 });
    expect(b.outcome.evaluation.labelMass).toEqual({ ok: 0.93 });
    const later = await dedup.answer("h", "r12", send);
    expect(sends).toBe(1);
    expect(later.copyOf).toBe("r3");
    expect(later.outcome.ok && later.outcome.evaluation.labelMass).toEqual({ ok: 0.93 });
    await dedup.answer("a", "x", async () => answered());
    await dedup.answer("b", "y", async () => answered());
    expect((await dedup.answer("h", "r13", send)).copyOf).toBeUndefined(); // the cache holds 2: sent again
    expect(sends).toBe(2);
  });

  it("sends once for a twin arriving between the answer and the cache", async () => {
    const dedup = new Dedup(10);
    let sends = 0;
    const send = async () => {
      sends++;
      return answered();
    };
    const first = dedup.answer("h", "r1", send);
    // Every microtask turn while the first finishes: a twin arriving at any of them must not send.
    const twins: Promise<unknown>[] = [];
    for (let turn = 0; turn < 20; turn++) {
      twins.push(dedup.answer("h", `t${turn}`, send));
      await Promise.resolve();
    }
    await first;
    twins.push(dedup.answer("h", "after", send));
    await Promise.all(twins);
    expect(sends).toBe(1);
  });

  it("a failure is shared with the twins in flight and not cached", async () => {
    const dedup = new Dedup(10);
    let sends = 0;
    const fail = async () => {
      sends++;
      return { ok: false as const, error: "upstream_error" as const, status: 503, message: "down" };
    };
    const [a, b] = await Promise.all([dedup.answer("h", "r1", fail), dedup.answer("h", "r2", fail)]);
    expect(a.outcome.ok || b.outcome.ok).toBe(false);
    expect(b.copyOf).toBe("r1");
    await dedup.answer("h", "r3", fail);
    expect(sends).toBe(2);
  });

  it("Lru forgets the least recently used", () => {
    const lru = new Lru<string, number>(2);
    lru.set("a", 1);
    lru.set("b", 2);
    lru.get("a");
    lru.set("c", 3);
    expect([lru.get("a"), lru.get("b"), lru.get("c")]).toEqual([1, undefined, 3]);
  });
});

describe("how a run ends", () => {
  const facts = (over: Partial<RunFacts>): RunFacts => ({ inputEnded: true, records: 100, otherShards: 0, unfinished: 0, maxErrorRate: 0, ...over });

  it("decide: done only at the input's end with every record's result and the outputs written; otherwise its own verdict", () => {
    const written = (answered: number, failed: number) => ({ written: { answered, failed } });
    expect(decide(facts({ records: 0 })).verdict).toBe("no-input");
    // Every record of the input left to other shards: an empty output, done.
    expect(decide(facts({ records: 0, otherShards: 3, ...written(0, 0) })).verdict).toBe("done");
    expect(decide(facts({ records: 5, ...written(0, 5), maxErrorRate: 1 })).verdict).toBe("all-failed");
    expect(decide(facts({ ...written(98, 2), maxErrorRate: 0.01 })).verdict).toBe("failures");
    expect(decide(facts({ ...written(99, 1), maxErrorRate: 0.01 })).verdict).toBe("done");
    expect(decide(facts({ ...written(100, 0) })).verdict).toBe("done");
    // Counters cannot make a done: the input's end not reached, a record without a result, outputs not written.
    expect(decide(facts({ inputEnded: false, ...written(100, 0) })).verdict).toBe("internal-error");
    expect(decide(facts({ unfinished: 8, ...written(92, 0) })).verdict).toBe("internal-error");
    expect(decide(facts({})).verdict).toBe("internal-error");
    // A stop is a stop, whatever was finished.
    expect(decide(facts({ ended: { verdict: "stopped", reason: "SIGTERM" }, ...written(100, 0) })).verdict).toBe("stopped");
  });

  it("RecordWatch stops when the first records all fail alike, not when they differ or one succeeds", () => {
    const failing = (watch: RecordWatch, ...args: Parameters<RecordWatch["failed"]>) => {
      try {
        watch.failed(...args);
        return undefined;
      } catch (error) {
        return error as Error;
      }
    };
    const same = new RecordWatch(5, 50);
    const reasons = [1, 2, 3, 4, 5].map((i) => failing(same, 0, "invalid_record", `line ${i}: record has no state field "text"`, false));
    expect(reasons.slice(0, 4)).toEqual([undefined, undefined, undefined, undefined]);
    expect(reasons[4]).toBeInstanceOf(AllFailedError);
    expect(reasons[4]?.message).toMatch(/first 5 records all failed.*no state field "text"/);

    const mixed = new RecordWatch(3, 50);
    mixed.failed(0, "invalid_record", "line 1: record has no id field", false);
    expect(failing(mixed, 422, "validation_error", "line 2: too long", true)).toBeUndefined();
    expect(failing(mixed, 0, "invalid_record", "line 3: record has no id field", false)).toBeUndefined();

    const answered = new RecordWatch(2, 50);
    answered.answered();
    expect([failing(answered, 0, "invalid_record", "x", false), failing(answered, 0, "invalid_record", "x", false)]).toEqual([undefined, undefined]);
  });

  it("RecordWatch aborts when the endpoint fails sent records in a row (429 and 5xx alike), never for copies or records' own faults", () => {
    const watch = new RecordWatch(20, 3);
    watch.failed(503, "upstream_error", "down", true);
    watch.failed(429, "rate_limit_error", "slow down", true);
    // A copy of a failed request, or an unusable record, is not the endpoint failing again.
    watch.failed(503, "upstream_error", "down", false);
    watch.failed(0, "invalid_record", "no state", false);
    expect(() => watch.failed(500, "internal_error", "boom", true)).toThrow(EndpointAbort);
    const reset = new RecordWatch(20, 2);
    reset.failed(503, "upstream_error", "down", true);
    reset.answered();
    expect(() => reset.failed(503, "upstream_error", "down", true)).not.toThrow();
  });
});

describe("the journal lock", () => {
  const dir = mkdtempSync(join(tmpdir(), "te-lock-"));

  it("refuses a second holder, naming the first; released, it can be taken again", () => {
    const path = join(dir, "a.lock");
    const lock = acquireLock(path);
    const holder = JSON.parse(readFileSync(path, "utf8"));
    expect(holder).toMatchObject({ host: hostname(), pid: process.pid });
    // A live holder (another process of this host) is never taken over.
    writeFileSync(path, JSON.stringify({ host: hostname(), pid: process.ppid, started: "2026-11-22T00:00:00Z" }));
    expect(() => acquireLock(path)).toThrow(LockedError);
    try {
      acquireLock(path);
    } catch (error) {
      expect((error as Error).message).toContain(`pid ${process.ppid} on ${hostname()}, started 2026-11-22T00:00:00Z`);
    }
    writeFileSync(path, JSON.stringify(holder));
    lock.release();
    expect(existsSync(path)).toBe(false);
    acquireLock(path).release();
  });

  it("takes over the lock of a process that is gone", async () => {
    const path = join(dir, "b.lock");
    const child = spawn(process.execPath, ["-e", "0"]);
    const pid = child.pid!;
    await new Promise((r) => child.on("exit", r));
    writeFileSync(path, JSON.stringify({ host: hostname(), pid, started: "2026-11-21T00:00:00Z" }));
    const lock = acquireLock(path);
    expect(JSON.parse(readFileSync(path, "utf8")).pid).toBe(process.pid);
    expect(existsSync(`${path}.takeover`)).toBe(false);
    lock.release();
  });

  it("never presumes a lock held on another host dead", () => {
    const path = join(dir, "c.lock");
    writeFileSync(path, JSON.stringify({ host: "worker-7", pid: 1, started: "2026-11-21T00:00:00Z" }));
    expect(() => acquireLock(path)).toThrow(/worker-7.*delete/);
  });
});
