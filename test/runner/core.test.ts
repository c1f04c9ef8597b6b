/** The runner's small modules in-process: the bounded loop, dedup, how a run ends, the journal lock. */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Dedup, Lru } from "../../src/runner/state/dedup.js";
import { acquireLock, LockedError } from "../../src/runner/state/lock.js";
import { forEachBounded, type LoopHooks } from "../../src/runner/send/loop.js";
import { FailureWatch, statusOf } from "../../src/runner/output/summary.js";
import { answer } from "../support/fake-evaluator.js";

async function* numbers(n: number, onRead?: (i: number) => void): AsyncGenerator<number> {
  for (let i = 0; i < n; i++) {
    onRead?.(i);
    yield i;
  }
}

const hooks = (over: Partial<LoopHooks> = {}): LoopHooks => ({
  onTaskError: () => undefined,
  onSourceError: () => undefined,
  onGraceOver: () => undefined,
  halted: () => false,
  ...over,
});
const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("forEachBounded", () => {
  it("runs at most `concurrency` at once and reads at most 2 x concurrency ahead", async () => {
    let read = 0;
    let running = 0;
    let most = 0;
    let mostAhead = 0;
    let finished = 0;
    const end = await forEachBounded(
      numbers(200, () => read++),
      4,
      async () => {
        most = Math.max(most, ++running);
        mostAhead = Math.max(mostAhead, read - finished);
        await tick(1);
        running--;
        finished++;
      },
      hooks(),
    );
    expect(end).toBe("done");
    expect(finished).toBe(200);
    expect(most).toBe(4);
    expect(mostAhead).toBeLessThanOrEqual(9);
  });

  it("on a stop takes no new record, lets those in hand finish, and reports stopped", async () => {
    const stop = new AbortController();
    const started: number[] = [];
    const done: number[] = [];
    const end = await forEachBounded(
      numbers(1000),
      3,
      async (i) => {
        started.push(i);
        if (i === 5) stop.abort();
        await tick(20);
        done.push(i);
      },
      hooks({ stop: stop.signal, graceMs: 5000 }),
    );
    expect(end).toBe("stopped");
    expect(started.length).toBeLessThan(12);
    expect(done.sort((a, b) => a - b)).toEqual(started.sort((a, b) => a - b));
  });

  it("calls onGraceOver when what is in hand outlasts the grace period", async () => {
    const stop = new AbortController();
    let graceOver = false;
    const release = new AbortController();
    const end = await forEachBounded(
      numbers(10),
      2,
      async (i) => {
        if (i === 0) stop.abort();
        await new Promise((resolve) => release.signal.addEventListener("abort", resolve));
      },
      hooks({
        stop: stop.signal,
        graceMs: 50,
        onGraceOver: () => {
          graceOver = true;
          release.abort();
        },
      }),
    );
    expect(end).toBe("stopped");
    expect(graceOver).toBe(true);
  });

  it("a failing input is reported before the tasks in hand are awaited, then thrown", async () => {
    async function* broken(): AsyncGenerator<number> {
      yield 1;
      throw new Error("bad gzip");
    }
    const calls: string[] = [];
    await expect(forEachBounded(broken(), 2, async () => void calls.push("task"), hooks({ onSourceError: () => void calls.push("source") }))).rejects.toThrow(
      "bad gzip",
    );
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
  it("statusOf: no input, all failed, failures above the rate, done", () => {
    expect(statusOf(0, { answered: 0, failed: 0 }, 0)).toBe("no-input");
    expect(statusOf(5, { answered: 0, failed: 5 }, 1)).toBe("all-failed");
    expect(statusOf(100, { answered: 98, failed: 2 }, 0.01)).toBe("failures");
    expect(statusOf(100, { answered: 99, failed: 1 }, 0.01)).toBe("done");
    expect(statusOf(100, { answered: 100, failed: 0 }, 0)).toBe("done");
    expect(statusOf(3, { answered: 3, failed: 0 }, 0)).toBe("done");
  });

  it("FailureWatch stops when the first records all fail alike, not when they differ or one succeeds", () => {
    const same = new FailureWatch(5);
    const reasons = [1, 2, 3, 4, 5].map((i) => same.failed(0, "invalid_record", `line ${i}: record has no state field "text"`));
    expect(reasons.slice(0, 4)).toEqual([undefined, undefined, undefined, undefined]);
    expect(reasons[4]).toMatch(/first 5 records all failed.*no state field "text"/);

    const mixed = new FailureWatch(3);
    mixed.failed(0, "invalid_record", "line 1: record has no id field");
    expect(mixed.failed(422, "validation_error", "line 2: too long")).toBeUndefined();
    expect(mixed.failed(0, "invalid_record", "line 3: record has no id field")).toBeUndefined();

    const answered = new FailureWatch(2);
    answered.answered();
    expect([answered.failed(0, "invalid_record", "x"), answered.failed(0, "invalid_record", "x")]).toEqual([undefined, undefined]);

    // The endpoint's failures are the in-a-row abort's business (resumable), not this one's.
    const endpoint = new FailureWatch(2);
    expect([endpoint.failed(503, "upstream_error", "down"), endpoint.failed(503, "upstream_error", "down")]).toEqual([undefined, undefined]);
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
