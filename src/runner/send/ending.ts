/**
 * How the answer stage ends early: the first ending wins (a stop, a store
 * failing, the endpoint given up on, a lock lost, a bug); the reading halts
 * at once, and so does every wait short of the wire (an attempt queued in
 * the limiter, a backoff): those requests are dropped unsent, so the grace
 * bounds the ending at any --rpm. What happens to the requests in flight depends on why: after a
 * stop, a store failing or the input failing they finish into the journal
 * within the grace (what was paid is kept), then are aborted; after a lost
 * lock, an endpoint given up on or a bug they are aborted at once. A second
 * signal (`now`) aborts them at once whatever the ending.
 */
import { setMaxListeners } from "node:events";
import type { Ending, Verdict } from "../../api/verdict.js";

/** Endings after which the requests in flight may finish into the journal. */
const DRAINING: ReadonlySet<Verdict> = new Set(["stopped", "storage-unavailable", "input-changed", "bad-input", "no-input"]);

const SECOND_SIGNAL = "a second signal stopped it at once: the requests in flight were abandoned, the records finished before it are kept";
const GRACE_OVER = (ms: number) => `the grace (${ms / 1000} s) ran out: the requests still in flight were abandoned, the records finished before it are kept`;

export class RunEnding {
  /** Aborted once anything ends the stage: no record is read or started any more, and no request waiting short of the wire is sent. */
  readonly halt = new AbortController();
  /** Aborted when the requests in flight must stop: every request listens on it. */
  readonly abort = new AbortController();
  private first: Ending | undefined;
  private lost = false;
  /** Why the requests in flight were abandoned, when a stop's were. */
  private abandoned: string | undefined;
  private grace: NodeJS.Timeout | undefined;
  private readonly detach: (() => void)[] = [];

  constructor(
    private readonly graceMs: number,
    options: { stop?: AbortSignal | undefined; now?: AbortSignal | undefined; concurrency: number },
  ) {
    // Every request in flight listens on `abort`: as many listeners as --concurrency, by design.
    setMaxListeners(Math.max(10, options.concurrency * 2 + 10), this.abort.signal);
    // And on `halt`: each request waiting short of the wire (in the limiter, a backoff), as many as --concurrency.
    setMaxListeners(Math.max(10, options.concurrency * 3 + 10), this.halt.signal);
    this.listen(options.stop, () => this.end({ verdict: "stopped", reason: "the records in flight finished and are kept" }));
    this.listen(options.now, () => {
      this.end({ verdict: "stopped", reason: SECOND_SIGNAL });
      this.abortNow(SECOND_SIGNAL);
    });
  }

  private listen(signal: AbortSignal | undefined, on: () => void): void {
    if (!signal) return;
    if (signal.aborted) return on();
    signal.addEventListener("abort", on, { once: true });
    this.detach.push(() => signal.removeEventListener("abort", on));
  }

  /** The ending, if anything ended the stage (a stop says whether the requests in flight were abandoned, and why). */
  get ended(): Ending | undefined {
    if (this.first?.verdict !== "stopped" || this.abandoned === undefined) return this.first;
    return { ...this.first, reason: this.abandoned };
  }

  /** Ends the stage (the first ending wins; a later one still halts and may abort). */
  end(ending: Ending, cause?: unknown): void {
    this.first ??= ending;
    if (ending.verdict === "lock-lost") this.lost = true;
    this.halt.abort();
    if (!DRAINING.has(ending.verdict)) return this.abortNow(cause ?? new Error(ending.reason));
    this.grace ??= setTimeout(() => this.abortNow(GRACE_OVER(this.graceMs)), this.graceMs);
  }

  private abortNow(reason: unknown): void {
    if (this.abort.signal.aborted) return;
    // A stop's own reasons (the second signal, the grace) say why what was in flight was abandoned.
    this.abandoned = typeof reason === "string" ? reason : undefined;
    this.abort.abort(typeof reason === "string" ? new Error(reason) : reason);
  }

  /** Whether journaling must stop: another run holds the journal now. */
  get lockLost(): boolean {
    return this.lost;
  }

  dispose(): void {
    clearTimeout(this.grace);
    for (const off of this.detach) off();
  }
}
