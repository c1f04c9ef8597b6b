/**
 * Sending one request: the run's only retry layer. Every attempt passes the
 * limiter (hold, pace, windows) and carries the run's timeout; the evaluator
 * is asked for exactly one attempt, whichever way it was built.
 */
import {
  AuthenticationError,
  OverloadedError,
  PermissionDeniedError,
  RateLimitError,
  RequestTimeoutError,
  TypedEvalError,
  UpstreamError,
  UpstreamUnavailableError,
} from "../../api/errors.js";
import { backoffMs, DEFAULT_RETRY, sleep } from "../../api/retry.js";
import { addBilled, noBilling, requestChars, type BillingSums } from "../../api/billing.js";
import type { EvaluatorRequest } from "../../api/schema.js";
import type { Evaluation, Evaluator } from "../../evaluator/evaluator.js";
import type { ErrorEntry } from "../state/journal.js";
import { EndpointAbort, EndpointMismatch, VerdictError } from "../../api/verdict.js";
import type { RunLimiter } from "./limiter.js";
import type { AttemptOutcome } from "./pacing.js";

export type Outcome = { ok: true; evaluation: Evaluation } | { ok: false; error: ErrorEntry["type"]; status: number; message: string };

/** What the run sent, as counted at the wire. */
export interface SendCounts {
  requests: number;
  retries: number;
  rateLimited: number;
  overloaded: number;
  wastedInput: number;
}

export interface SenderOptions {
  evaluator: Evaluator;
  limiter: RunLimiter;
  /** Attempts per record beyond the first, for 408, 429, 5xx and unreachable upstreams. */
  maxRetries: number;
  /** Per attempt, for remote endpoints. */
  timeoutMs?: number | undefined;
  /** Aborts the requests at the wire (a lost lock, the grace over, a second signal). */
  signal: AbortSignal;
  /**
   * Aborted once the run is ending (a stop, any ending): what has not reached
   * the wire (an attempt waiting in the limiter, a backoff, a retry permit) is
   * dropped at once, unsent (`NotSent`). Default: `signal`.
   */
  halt?: AbortSignal | undefined;
  /** The run's lock: checked before every attempt, so a run whose lock was taken over sends nothing more. */
  fence?: { assertHeld(): void } | undefined;
  /** For tests: the jitter. */
  random?: () => number;
}

/**
 * An endpoint's error that ends the run whatever the record: the key
 * refused (401, 403), an address that is not the API (every record would
 * fail alike: stop at the first answer, naming --base-url) and, at the
 * first contact (`contact`), nothing answering at all.
 */
function endingOf(error: unknown, contact = true): VerdictError | undefined {
  if (error instanceof AuthenticationError || error instanceof PermissionDeniedError) {
    return new EndpointAbort(`the endpoint refused the API key (HTTP ${error.status}: ${error.message})`);
  }
  if (error instanceof UpstreamUnavailableError && error.notTheApi) return new EndpointMismatch(error.message);
  if (contact && error instanceof UpstreamUnavailableError && error.unreachable) return new EndpointAbort(error.message);
  return undefined;
}

/** Waits for the gate to open; an abort, or what shut the gate, ends the wait. */
function waitOpen(gate: Promise<void>, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    const off = () => signal.removeEventListener("abort", onAbort);
    gate.then(
      () => (off(), resolve()),
      (error: unknown) => (off(), reject(error)),
    );
  });
}

/** How an error reads to the pace. */
function outcomeOf(error: unknown): AttemptOutcome {
  if (error instanceof RateLimitError) return error.serverDelay ? "held" : "throttled";
  if (error instanceof OverloadedError) return "overloaded";
  return "failed";
}

/**
 * A request the run dropped before it reached the wire: the run is ending
 * (a stop, a store failing) and it was still waiting (in the limiter, a
 * backoff, for a retry permit). Nothing was sent or paid for it; the record
 * has no result, so the rerun asks it.
 */
export class NotSent extends Error {
  override name = "NotSent";
  constructor() {
    super("the run ended before this request was sent");
  }
}

export class Sender {
  readonly counts: SendCounts = { requests: 0, retries: 0, rateLimited: 0, overloaded: 0, wastedInput: 0 };
  /** What the answered requests were billed, against their characters: the figures `estimate --from-usage` projects from. */
  readonly billed: BillingSums = noBilling();
  /**
   * Open once the run's first request has had its first attempt without
   * ending the run; every other request waits for it. Undefined until the
   * first request comes.
   */
  private gate: Promise<void> | undefined;

  constructor(private readonly options: SenderOptions) {}

  /** The signal that ends every wait short of the wire. */
  private get halt(): AbortSignal {
    return this.options.halt ?? this.options.signal;
  }

  /**
   * One request, with retries; every attempt goes through the limiter. The
   * run's first request first contacts the endpoint (reachable, the key
   * taken, nothing billed) and then goes alone: a refused key, a model the
   * key may not use or an address that is not the API costs one request,
   * not the batch in flight. Nothing is contacted before a record must be
   * asked: a rerun whose records are all journaled reaches no endpoint.
   * Throws `NotSent` when the run ends while it waits short of the wire.
   */
  async send(request: EvaluatorRequest, estimate: number): Promise<Outcome> {
    const gate = this.gate;
    if (gate) {
      await this.waiting(() => waitOpen(gate, this.halt));
      return this.attempts(request, estimate);
    }
    let open = () => {};
    let shut = (_error: unknown) => {};
    this.gate = new Promise<void>((resolve, reject) => {
      open = resolve;
      shut = reject;
    });
    // Whoever waits is told; nobody waiting is no unhandled rejection.
    this.gate.catch(() => undefined);
    try {
      if (!(await this.contact(request.model))) open();
      return await this.attempts(request, estimate, open);
    } catch (error) {
      // What ended the first request ends those waiting for it the same way (no-op once the gate is open).
      shut(error);
      throw error;
    }
  }

  /** The endpoint's first contact, its refusals as what ends the run; whether it was made (an embedded model has none). */
  private async contact(model: string): Promise<boolean> {
    const { evaluator, signal, timeoutMs } = this.options;
    try {
      return (await evaluator.firstContact?.(model, { signal, ...(timeoutMs ? { timeoutMs } : {}) })) ?? false;
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      throw endingOf(error) ?? error;
    }
  }

  /** A request's attempts; `opened` is told once the first one ended without ending the run. */
  private async attempts(request: EvaluatorRequest, estimate: number, opened?: () => void): Promise<Outcome> {
    const { limiter, signal } = this.options;
    for (let attempt = 0; ; attempt++) {
      signal.throwIfAborted();
      if (this.halt.aborted) throw new NotSent();
      this.options.fence?.assertHeld();
      if (attempt > 0) await this.waiting(() => limiter.retryPermit(this.halt));
      try {
        const evaluation = await this.attempt(request, estimate, attempt);
        opened?.();
        limiter.observe("ok");
        limiter.settle(estimate, evaluation.response.usage.input_tokens);
        addBilled(this.billed, requestChars(request), evaluation.response.usage.input_tokens);
        return { ok: true, evaluation };
      } catch (error) {
        const final = this.failed(error, estimate, attempt);
        opened?.();
        if (final) return final;
        await this.waiting(() => this.backOff(error, attempt));
      }
    }
  }

  /** A wait short of the wire: cut by the run's ending, as `NotSent`. */
  private async waiting(wait: () => Promise<void>): Promise<void> {
    try {
      await wait();
    } catch (error) {
      // Aborted outright (a lost lock, a second signal): as before, the abort's reason. Only halted: dropped unsent.
      if (this.options.signal.aborted) throw this.options.signal.reason;
      if (this.halt.aborted) throw new NotSent();
      throw error;
    }
  }

  /** One attempt through the limiter (its wait cut by the run's ending), counted at the wire. */
  private async attempt(request: EvaluatorRequest, estimate: number, attempt: number): Promise<Evaluation> {
    const { evaluator, limiter, signal } = this.options;
    let sent = false;
    try {
      return await limiter.schedule(
        estimate,
        () => {
          // Again at the wire: the limiter may have held this attempt for long.
          this.options.fence?.assertHeld();
          sent = true;
          this.counts.requests++;
          if (attempt > 0) this.counts.retries++;
          return evaluator.evaluate(request, {
            retryCount: attempt,
            signal,
            once: true,
            ...(this.options.timeoutMs ? { timeoutMs: this.options.timeoutMs } : {}),
          });
        },
        this.halt,
      );
    } catch (error) {
      if (!sent && this.halt.aborted && !(error instanceof VerdictError)) throw new NotSent();
      throw error;
    }
  }

  /**
   * A failed attempt: throws what ends the run (an abort, a lost lock or a
   * failing store, a refused key, an unreachable endpoint), returns the
   * record's failure when it is final, or undefined when it is retried.
   */
  private failed(error: unknown, estimate: number, attempt: number): Outcome | undefined {
    const { limiter, signal, maxRetries } = this.options;
    if (error instanceof NotSent) throw error;
    if (signal.aborted) throw signal.reason;
    // A lock lost or a store failing (from the fence) ends the run; so does an abort of our own, a refused key, an address that is not the API.
    if (error instanceof VerdictError) throw error;
    const ending = endingOf(error, false);
    if (ending) throw ending;
    limiter.observe(outcomeOf(error));
    if (error instanceof RateLimitError) this.counts.rateLimited++;
    else if (error instanceof OverloadedError) this.counts.overloaded++;
    else if (error instanceof UpstreamError || error instanceof RequestTimeoutError) this.counts.wastedInput += estimate;
    const typed = error instanceof TypedEvalError ? error : undefined;
    if (typed?.retryable && attempt < maxRetries) return undefined;
    if (error instanceof UpstreamUnavailableError && error.unreachable) throw new EndpointAbort(`the endpoint is unreachable (${error.message})`);
    return { ok: false, error: typed?.code ?? "internal_error", status: typed?.status ?? 0, message: (error as Error).message };
  }

  /** Waits before the next attempt: the server's delay when it gave one, else a jittered backoff. */
  private async backOff(error: unknown, attempt: number): Promise<void> {
    const { limiter } = this.options;
    const random = this.options.random ?? Math.random;
    const serverDelay =
      (error instanceof RateLimitError || error instanceof OverloadedError) && error.serverDelay && error.retryAfterMs <= DEFAULT_RETRY.maxServerDelayMs
        ? error.retryAfterMs
        : undefined;
    if (error instanceof RateLimitError && serverDelay !== undefined) {
      // The account's limit: hold every new attempt, this one included, until the endpoint said. The refused
      // record itself also waits its own backoff (the server's delay is a floor): a 429 storm longer than a few
      // short holds would otherwise use up its retries inside the storm (4 of 108 records, in 700 ms of 40 ms holds).
      limiter.hold(serverDelay);
      await sleep(backoffMs(attempt, DEFAULT_RETRY, random), this.halt);
    } else {
      // Sporadic failures are this request's own: back off with jitter, the run goes on.
      await sleep(serverDelay ?? backoffMs(attempt, DEFAULT_RETRY, random), this.halt);
    }
  }
}
