/**
 * How the answer stage ends early: the first ending wins (a stop, a store
 * failing, the endpoint given up on, a lock lost, a bug); the reading halts
 * at once. What happens to the requests in flight depends on why: after a
 * stop, a store failing or the input failing they finish into the journal
 * within the grace (what was paid is kept), then are aborted; after a lost
 * lock, an endpoint given up on or a bug they are aborted at once. A second
 * signal (`now`) aborts them at once whatever the ending.
 */
import { setMaxListeners } from "node:events";
import type { Ending, Verdict } from "../../api/verdict.js";

/** Endings after which the requests in flight may finish into the journal. */
const DRAINING: ReadonlySet<Verdict> = new Set(["stopped", "storage-unavailable", "input-changed", "bad-input", "no-input"]);

export class RunEnding {
  /** Aborted once anything ends the stage: no record is read or started any more. */
  readonly halt = new AbortController();
  /** Aborted when the requests in flight must stop: every request listens on it. */
  readonly abort = new AbortController();
  private first: Ending | undefined;
  private lost = false;
  private grace: NodeJS.Timeout | undefined;
  private readonly detach: (() => void)[] = [];

  constructor(
    private readonly graceMs: number,
    options: { stop?: AbortSignal | undefined; now?: AbortSignal | undefined; concurrency: number },
  ) {
    // Every request in flight listens on `abort`: as many listeners as --concurrency, by design.
    setMaxListeners(Math.max(10, options.concurrency * 2 + 10), this.abort.signal);
    this.listen(options.stop, () => this.end({ verdict: "stopped", reason: "the records in flight finished and are kept" }));
    this.listen(options.now, () => {
      this.end({ verdict: "stopped", reason: "stopped at once by a second signal; the records finished before it are kept" });
      this.abortNow(new Error("stopped at once"));
    });
  }

  private listen(signal: AbortSignal | undefined, on: () => void): void {
    if (!signal) return;
    if (signal.aborted) return on();
    signal.addEventListener("abort", on, { once: true });
    this.detach.push(() => signal.removeEventListener("abort", on));
  }

  /** The ending, if anything ended the stage. */
  get ended(): Ending | undefined {
    return this.first;
  }

  /** Ends the stage (the first ending wins; a later one still halts and may abort). */
  end(ending: Ending, cause?: unknown): void {
    this.first ??= ending;
    if (ending.verdict === "lock-lost") this.lost = true;
    this.halt.abort();
    if (!DRAINING.has(ending.verdict)) return this.abortNow(cause ?? new Error(ending.reason));
    this.grace ??= setTimeout(() => this.abortNow(new Error("the grace period ran out")), this.graceMs);
  }

  private abortNow(reason: unknown): void {
    if (!this.abort.signal.aborted) this.abort.abort(reason);
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
