/**
 * Which journal entry belongs to which record: entries are found by what a
 * record is and what it asks (its id and the hash of its request, `h`),
 * never by its position in the input, so deleting lines at the top of an
 * input repays nothing below them, an edited record or a reworded question
 * is asked again, and an entry of another version is set aside, never
 * written for the record that replaced it.
 *
 * Compact, for inputs of millions of records: each (id, request) key is a
 * 64-bit key (32 bits of the id's hash and 32 of the request hash; the
 * request hash's 64 for a job without ids) in an
 * open-addressing table of typed arrays: the key, where its entry lies in
 * the journal (the answer, else the latest error), a hash of its kept
 * values, the answer's tokens (paid, whether or not it is written) and a few
 * flags: 37 bytes a key at most (29 in the entries, 4 or 8 in the table).
 */
import { mixedHash } from "../../records/hash.js";

/** An answer for the key is in the journal. */
const ANSWERED = 1;
/** That answer was sent for the key, not copied from an identical request (a copy never replaces it). */
const SENT = 2;
/** This run journaled an error for the key. */
const FAILED_NOW = 4;
/** A record of this run's input has the key. */
const SEEN = 8;
/** The key's entry has been written to the outputs already (a later record with the key is a copy). */
const WRITTEN = 32;

/** 32 bits of a request hash (hex digits `from` to `from + 8`); 0 for an entry written without one. */
function requestBits(h: string | undefined, from: number): number {
  return h ? Number.parseInt(h.slice(from, from + 8), 16) >>> 0 : 0;
}

/** Typed arrays grown by doubling. */
function grown<T extends Uint32Array | Float64Array | Uint8Array>(old: T, length: number, make: (n: number) => T): T {
  const next = make(length);
  next.set(old);
  return next;
}

export class JournalIndex {
  private slots = new Uint32Array(2048);
  private hi = new Uint32Array(1024);
  private lo = new Uint32Array(1024);
  private at = new Float64Array(1024);
  private flags = new Uint8Array(1024);
  /** A hash of the kept fields' names and values journaled for the key's answer (`keptHash`). */
  private kept = new Uint32Array(1024);
  /** The tokens the key's answer was paid for (a copy's are 0). */
  private tokensIn = new Uint32Array(1024);
  private tokensOut = new Uint32Array(1024);
  /** Keep entries journaled for a key after its answer (the job's kept fields changed): key -> the latest one's offset. */
  readonly rekept = new Map<number, number>();
  /** Keys held. */
  size = 0;

  /**
   * @param byId whether records are told apart by their id (the job names an
   * id field); without one a record is what it asks, and identical records are
   * copies of one another.
   */
  constructor(private readonly byId: boolean) {}

  /** The key of a record: its entry number, made if it is new. */
  key(id: string, h: string | undefined): number {
    // Without ids, a record is what it asks: the whole 64 bits of its request hash.
    const hi = this.byId ? mixedHash(id) : requestBits(h, 8);
    const lo = requestBits(h, 0);
    const mask = this.slots.length - 1;
    for (let slot = (Math.imul(hi ^ lo, 0x9e3779b1) >>> 0) & mask; ; slot = (slot + 1) & mask) {
      const found = this.slots[slot] as number;
      if (found === 0) return this.add(slot, hi, lo);
      if (this.hi[found - 1] === hi && this.lo[found - 1] === lo) return found - 1;
    }
  }

  private add(slot: number, hi: number, lo: number): number {
    const key = this.size++;
    if (key >= this.flags.length) {
      const n = this.flags.length * 2;
      this.hi = grown(this.hi, n, (m) => new Uint32Array(m));
      this.lo = grown(this.lo, n, (m) => new Uint32Array(m));
      this.at = grown(this.at, n, (m) => new Float64Array(m));
      this.flags = grown(this.flags, n, (m) => new Uint8Array(m));
      this.kept = grown(this.kept, n, (m) => new Uint32Array(m));
      this.tokensIn = grown(this.tokensIn, n, (m) => new Uint32Array(m));
      this.tokensOut = grown(this.tokensOut, n, (m) => new Uint32Array(m));
    }
    this.hi[key] = hi;
    this.lo[key] = lo;
    this.at[key] = -1;
    this.slots[slot] = key + 1;
    // At most half full: probes stay short.
    if (this.size * 2 > this.slots.length) this.rehash();
    return key;
  }

  private rehash(): void {
    const slots = new Uint32Array(this.slots.length * 2);
    const mask = slots.length - 1;
    for (let key = 0; key < this.size; key++) {
      let slot = (Math.imul((this.hi[key] as number) ^ (this.lo[key] as number), 0x9e3779b1) >>> 0) & mask;
      while (slots[slot] !== 0) slot = (slot + 1) & mask;
      slots[slot] = key + 1;
    }
    this.slots = slots;
  }

  /** An answer for `key` lies at `offset` (paid for `usage`): it replaces an error, and a copy never replaces a sent answer. */
  answered(key: number, offset: number, copy: boolean, usage?: { input_tokens: number; output_tokens: number }): void {
    const flags = this.flags[key] as number;
    if (copy && flags & SENT) return;
    this.flags[key] = flags | ANSWERED | (copy ? 0 : SENT);
    this.at[key] = offset;
    this.tokensIn[key] = usage?.input_tokens ?? 0;
    this.tokensOut[key] = usage?.output_tokens ?? 0;
  }

  /** An error for `key` lies at `offset` (`now`: journaled by this run); an answer is never replaced by an error. */
  failed(key: number, offset: number, now: boolean): void {
    const flags = this.flags[key] as number;
    if (now) this.flags[key] = flags | FAILED_NOW;
    if (!(flags & ANSWERED)) this.at[key] = offset;
  }

  /** Whether `key` has an answer in the journal: a record asking it again is resumed. */
  isAnswered(key: number): boolean {
    return ((this.flags[key] as number) & ANSWERED) !== 0;
  }

  /** Whether `key` has a result for this run: an answer (from any run), or an error this run journaled. */
  hasResult(key: number): boolean {
    return ((this.flags[key] as number) & (ANSWERED | FAILED_NOW)) !== 0;
  }

  /** Whether any key has a finished record in the journal (an answer, or an error), this run's or an earlier one's: only then is work kept. */
  holdsResults(): boolean {
    for (let key = 0; key < this.size; key++) if (((this.flags[key] as number) & ANSWERED) !== 0 || (this.at[key] as number) >= 0) return true;
    return false;
  }

  /** Marks `key` as a record of this run's input; false when an earlier record of it already was (a repeated record). */
  see(key: number): boolean {
    const flags = this.flags[key] as number;
    this.flags[key] = flags | SEEN;
    return (flags & SEEN) === 0;
  }

  /** Notes the kept fields journaled for `key`'s answer (their `keptHash`). */
  markKeep(key: number, hash: number): void {
    this.kept[key] = hash;
  }

  /** Whether the kept fields of `key`'s answer differ from the record's as read now (other fields, or edited values): they are journaled anew. */
  staleKeep(key: number, hash: number): boolean {
    return this.kept[key] !== hash;
  }

  /** Where `key`'s entry (its answer, else its latest error) lies in the journal; -1 for none. */
  offsetOf(key: number): number {
    return this.at[key] as number;
  }

  /** Forgets which keys were written: the outputs are read from the start again. */
  forgetWritten(): void {
    for (let key = 0; key < this.size; key++) this.flags[key] = (this.flags[key] as number) & ~WRITTEN;
  }

  /** Marks `key` written; false when it already was (the record repeats an earlier one of the output). */
  write(key: number): boolean {
    const flags = this.flags[key] as number;
    this.flags[key] = flags | WRITTEN;
    return (flags & WRITTEN) === 0;
  }

  /**
   * The journal's keys no record of this run's input has: entries of another
   * version of a record that is still there (its request changed: the job or
   * the record was edited), and entries of records no longer in the input.
   * Both are set aside, never written; the tokens their answers were paid
   * for are counted (paid is paid).
   */
  setAside(): { otherVersions: number; notInInput: number; inputTokens: number; outputTokens: number } {
    let inputTokens = 0;
    let outputTokens = 0;
    for (let key = 0; key < this.size; key++) {
      if ((this.flags[key] as number) & SEEN) continue;
      inputTokens += this.tokensIn[key] as number;
      outputTokens += this.tokensOut[key] as number;
    }
    const unseen = this.count((flags) => !(flags & SEEN));
    if (!this.byId || unseen === 0) return { otherVersions: 0, notInInput: unseen, inputTokens, outputTokens };
    const ids = new Uint32Array(this.count((flags) => (flags & SEEN) !== 0));
    let n = 0;
    for (let key = 0; key < this.size; key++) if ((this.flags[key] as number) & SEEN) ids[n++] = this.hi[key] as number;
    ids.sort();
    let otherVersions = 0;
    let notInInput = 0;
    for (let key = 0; key < this.size; key++) {
      if ((this.flags[key] as number) & SEEN) continue;
      if (contains(ids, this.hi[key] as number)) otherVersions++;
      else notInInput++;
    }
    return { otherVersions, notInInput, inputTokens, outputTokens };
  }

  private count(test: (flags: number) => boolean): number {
    let n = 0;
    for (let key = 0; key < this.size; key++) if (test(this.flags[key] as number)) n++;
    return n;
  }
}

/** A 32-bit hash of kept fields, names and values: the request hash does not cover them, so an edit to one is found by this. */
export function keptHash(keep: Record<string, unknown> | undefined): number {
  return mixedHash(JSON.stringify(keep ?? {}));
}

/** Binary search in a sorted array. */
function contains(sorted: Uint32Array, value: number): boolean {
  let low = 0;
  let high = sorted.length - 1;
  while (low <= high) {
    const mid = (low + high) >>> 1;
    const at = sorted[mid] as number;
    if (at === value) return true;
    if (at < value) low = mid + 1;
    else high = mid - 1;
  }
  return false;
}
