/**
 * Watching records as they finish, for the two reasons to stop a run early:
 * the endpoint failing record after record with nothing answered between
 * (it is down, not picky: abort, resumable, rather than write the whole
 * input to the errors file), and the first records all failing for one
 * reason of their own (a wrong state field, format or path: the rest will
 * too, so stop in seconds, not at dawn). Which failures are the endpoint's
 * is one rule, `isEndpointFailure` (api/verdict.ts).
 */
import { AllFailedError, EndpointAbort, isEndpointFailure } from "../../api/verdict.js";

export class RecordWatch {
  private inARow = 0;
  private seen = 0;
  private reason: string | undefined;
  private first: string | undefined;
  private decided = false;

  /**
   * @param window the first records that, all failing alike, stop the run
   * @param maxInARow endpoint failures of sent requests in a row that abort it
   */
  constructor(
    private readonly window: number,
    private readonly maxInARow: number,
  ) {}

  /** A record was answered: the endpoint works, and the first records did not all fail. */
  answered(): void {
    this.inARow = 0;
    this.decided = true;
  }

  /**
   * A record failed (`sent`: its own request was sent, not copied); throws
   * `EndpointAbort` or `AllFailedError` when the run should stop.
   */
  failed(status: number, type: string, message: string, sent: boolean): void {
    const endpoint = isEndpointFailure(status, type);
    if (sent && endpoint && ++this.inARow >= this.maxInARow) {
      throw new EndpointAbort(`the endpoint failed ${this.inARow} records in a row with nothing answered between them (the last: ${message})`);
    }
    if (this.decided) return;
    if (endpoint) {
      this.decided = true;
      return;
    }
    const text = message.replace(/^line \d+: /, "");
    const key = `${type}\u0000${text.replace(/\d+/g, "#")}`;
    if (this.seen === 0) {
      this.reason = key;
      this.first = `${type}: ${text}`;
    } else if (key !== this.reason) {
      this.decided = true;
      return;
    }
    if (++this.seen < this.window) return;
    this.decided = true;
    throw new AllFailedError(
      `the first ${this.seen} records all failed for the same reason (${this.first}); check the job's state and id fields, --format and the input path`,
    );
  }

  /** The reason the records finished so far all failed for, when they did (however few they are). */
  sameReason(): string | undefined {
    if (this.decided || this.seen === 0) return undefined;
    return `${this.seen === 1 ? "the only record" : `all ${this.seen} records`} failed for the same reason (${this.first})`;
  }
}
