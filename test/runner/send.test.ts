/** The one retry layer, in-process: every attempt through the limiter, one attempt per evaluator call. */
import { afterEach, describe, expect, it } from "vitest";
import { AuthenticationError, OverloadedError, RateLimitError, UnprocessableEntityError, UpstreamError } from "../../src/api/errors.js";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { RunLimiter } from "../../src/runner/send/limiter.js";
import { Sender } from "../../src/runner/send/send.js";
import { EndpointAbort } from "../../src/api/verdict.js";
import { answer, FakeEvaluator } from "../support/fake-evaluator.js";

const request: SystemOneRequest = { model: "default", state: "a ticket", questions: { ok: { type: "noul" } } };
const limiters: RunLimiter[] = [];
const limiter = () => {
  const l = new RunLimiter({ requestsPerMinute: 1e9, tokensPerSecond: 1e12 });
  limiters.push(l);
  return l;
};
afterEach(async () => {
  await Promise.all(limiters.splice(0).map((l) => l.stop()));
});
const noJitter = () => 1; // backoff minus its full 25% jitter: 375 ms, 750 ms, ...

describe("Sender", () => {
  it("gives an always-500 endpoint exactly max-retries + 1 attempts, each a single attempt with the run's timeout", async () => {
    const evaluator = new FakeEvaluator(() => {
      throw new UpstreamError(500, "boom");
    });
    const sender = new Sender({ evaluator, limiter: limiter(), maxRetries: 2, timeoutMs: 1234, signal: new AbortController().signal, random: noJitter });
    const outcome = await sender.send(request, 10);
    expect(outcome).toMatchObject({ ok: false, status: 500 });
    expect(evaluator.calls).toHaveLength(3);
    expect(evaluator.calls.map((c) => c.options.retryCount)).toEqual([0, 1, 2]);
    expect(evaluator.calls.every((c) => c.options.once === true && c.options.timeoutMs === 1234)).toBe(true);
    expect(sender.counts).toMatchObject({ requests: 3, retries: 2, wastedInput: 30 });
  });

  it("does not retry what retrying cannot mend (a 422)", async () => {
    const evaluator = new FakeEvaluator(() => {
      throw new UnprocessableEntityError([{ type: "value_error", loc: ["body"], msg: "no" }]);
    });
    const sender = new Sender({ evaluator, limiter: limiter(), maxRetries: 5, signal: new AbortController().signal });
    expect(await sender.send(request, 1)).toMatchObject({ ok: false, status: 422 });
    expect(evaluator.calls).toHaveLength(1);
  });

  it("aborts the run when the key is refused", async () => {
    const evaluator = new FakeEvaluator(() => {
      throw new AuthenticationError("bad key");
    });
    const sender = new Sender({ evaluator, limiter: limiter(), maxRetries: 5, signal: new AbortController().signal });
    await expect(sender.send(request, 1)).rejects.toBeInstanceOf(EndpointAbort);
  });

  it("a 429 that says how long holds every request; a 529 delays only its own", async () => {
    const l = limiter();
    let first = true;
    const evaluator = new FakeEvaluator((r, call) => {
      if (call === 0 && first) {
        first = false;
        throw new RateLimitError("slow down", 300);
      }
      return answer(r);
    });
    const sender = new Sender({ evaluator, limiter: l, maxRetries: 3, signal: new AbortController().signal });
    const started = Date.now();
    await sender.send(request, 1);
    // Another request sent right after the 429 also waits for the hold.
    await sender.send(request, 1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(sender.counts.rateLimited).toBe(1);

    const l2 = limiter();
    let overloaded = true;
    const slow = new FakeEvaluator((r) => {
      if (overloaded) {
        overloaded = false;
        throw new OverloadedError("busy", 400);
      }
      return answer(r);
    });
    const s2 = new Sender({ evaluator: slow, limiter: l2, maxRetries: 3, signal: new AbortController().signal });
    const t0 = Date.now();
    const retried = s2.send(request, 1);
    const other = await s2.send(request, 1); // not held by the other request's 529
    expect(other.ok).toBe(true);
    expect(Date.now() - t0).toBeLessThan(200);
    await retried;
    expect(Date.now() - t0).toBeGreaterThanOrEqual(390);
    expect(s2.counts.overloaded).toBe(1);
  });

  it("a 429 storm of short holds does not use up a record's retries: the record also waits its own backoff", async () => {
    const stormEnds = Date.now() + 700;
    const evaluator = new FakeEvaluator((r) => {
      if (Date.now() < stormEnds) throw new RateLimitError("storm", 40);
      return answer(r);
    });
    const sender = new Sender({ evaluator, limiter: limiter(), maxRetries: 4, signal: new AbortController().signal, random: noJitter });
    const outcome = await sender.send(request, 1);
    expect(outcome.ok).toBe(true);
    // Attempts at 0, 375 and 1,125 ms: two refused, the third answered (with the hold alone: every 40 ms, five refused).
    expect(evaluator.calls).toHaveLength(3);
    expect(sender.counts.rateLimited).toBe(2);
  });

  it("stops waiting when the run is aborted", async () => {
    const evaluator = new FakeEvaluator(() => {
      throw new UpstreamError(503, "down");
    });
    const abort = new AbortController();
    const sender = new Sender({ evaluator, limiter: limiter(), maxRetries: 6, signal: abort.signal });
    const sending = sender.send(request, 1);
    setTimeout(() => abort.abort(new Error("stop")), 50);
    await expect(sending).rejects.toThrow("stop");
    expect(evaluator.calls).toHaveLength(1);
  });
});
