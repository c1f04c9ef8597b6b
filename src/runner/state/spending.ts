/**
 * What a run spent, journaled as it goes (a `run` entry every few seconds
 * with new requests, and one at the end): a run killed by kill -9 loses at
 * most the last few seconds of its request and time counts, and the usage
 * summary adds up every run of an output, killed ones included.
 */
import type { SendCounts } from "../send/send.js";
import { addSums, noBilling, type BillingSums } from "../../api/billing.js";
import type { Entry } from "./journal.js";

/** How often a run journals what it has spent: a kill -9 loses at most this much of its request and time counts. */
export const SPEND_INTERVAL_MS = 2000;

export class SpendingJournal {
  readonly intervalMs = SPEND_INTERVAL_MS;
  /** What was journaled so far (the counts at the last entry, and its time on the monotonic clock). */
  private readonly spent: SendCounts & { at: number };
  /** The billing sums at the last entry. */
  private readonly spentBilled = noBilling();

  constructor(
    private readonly journal: { append(entry: Entry): unknown },
    private readonly sent: SendCounts,
    private readonly started: number,
    private readonly billed: BillingSums = noBilling(),
  ) {
    // Elapsed time on the monotonic clock: a wall clock stepped back never makes a run's seconds negative.
    this.spent = { at: performance.now(), requests: 0, retries: 0, rateLimited: 0, overloaded: 0, wastedInput: 0 };
  }

  /** Journals what was spent since the last entry (when anything was, or always when `final`); a journal that fails throws. */
  record(final: boolean): void {
    const { sent, spent } = this;
    if (!final && sent.requests === spent.requests) return;
    const now = performance.now();
    this.journal.append({
      k: "run",
      started: new Date(this.started).toISOString(),
      seconds: (now - spent.at) / 1000,
      requests: sent.requests - spent.requests,
      retries: sent.retries - spent.retries,
      rate_limited: sent.rateLimited - spent.rateLimited,
      overloaded: sent.overloaded - spent.overloaded,
      wasted_input_tokens: sent.wastedInput - spent.wastedInput,
      ...(this.billed.requests > this.spentBilled.requests ? { billing: addSums({ ...this.billed }, this.spentBilled, -1) } : {}),
    });
    Object.assign(spent, { at: now, ...sent });
    Object.assign(this.spentBilled, this.billed);
  }
}
