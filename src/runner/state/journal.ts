/**
 * The run journal: one JSON line per finished record, appended with a
 * synchronous write the moment the record finishes. It is the run's only
 * state. A killed run (even kill -9) loses at most the records in flight;
 * rerunning reads the journal and skips what it holds. Outputs are written
 * from the journal, so they never hold a record twice.
 */
import { closeSync, createReadStream, existsSync, openSync, readSync, statSync, truncateSync, writeSync } from "node:fs";
import { createInterface } from "node:readline";
import type { Answer, Usage } from "../../api/schema.js";
import { InvocationError } from "../../api/errors.js";

export interface AnswerEntry {
  k: "answer";
  seq: number;
  line: number;
  source: string;
  id: string;
  /** First 16 hex digits of the request hash: a changed input line is not taken as done. */
  h: string;
  model: string;
  answers: Record<string, Answer>;
  usage: Usage;
  keep?: Record<string, unknown>;
  /**
   * Set when the answers were copied from an identical earlier request (usage is then zero): the id of
   * the record whose request was sent. Journals written before ids were used hold its seq (a number).
   */
  dedup_of?: string | number;
  label_mass?: Record<string, number>;
}

export interface ErrorEntry {
  k: "error";
  seq: number;
  line: number;
  source: string;
  id: string;
  h?: string;
  /** HTTP status, or 0 for input problems. */
  status: number;
  type: string;
  message: string;
}

/**
 * What a run spent since its previous entry: appended every few seconds and
 * when it ends, so a killed run loses at most the last few seconds of its
 * counts. Every entry of one invocation has the same `started`.
 */
export interface RunEntry {
  k: "run";
  started: string;
  seconds: number;
  requests: number;
  retries: number;
  rate_limited: number;
  overloaded: number;
  /** Input tokens of requests that were sent but whose answer was not kept (failed attempts). */
  wasted_input_tokens: number;
}

/**
 * Kept fields re-read from the input for a record answered by an earlier run
 * whose job kept other fields: the output holds what the current job keeps,
 * without asking the model again.
 */
export interface KeepEntry {
  k: "keep";
  seq: number;
  keep: Record<string, unknown>;
}

/** The input a journal belongs to, written first; a run on another input is refused. */
export interface InputEntry {
  k: "input";
  input: string;
}

export type Entry = AnswerEntry | ErrorEntry | RunEntry | InputEntry | KeepEntry;

/** The journal holds another input's records. */
export class JournalMismatchError extends InvocationError {
  override name = "JournalMismatchError";
}

/**
 * Which records are done: seq -> the request hash prefix it was answered for.
 * Typed arrays indexed by seq: 9 bytes a record, so a million records take 9 MB.
 */
export class DoneIndex {
  private high = new Uint32Array(1024);
  private low = new Uint32Array(1024);
  private present = new Uint8Array(1024);
  private stale = new Uint8Array(1024);
  size = 0;

  private grow(seq: number): void {
    if (seq < this.present.length) return;
    let length = this.present.length;
    while (length <= seq) length *= 2;
    const resize = <T extends Uint32Array | Uint8Array>(old: T, make: (n: number) => T): T => {
      const next = make(length);
      next.set(old);
      return next;
    };
    this.high = resize(this.high, (n) => new Uint32Array(n));
    this.low = resize(this.low, (n) => new Uint32Array(n));
    this.present = resize(this.present, (n) => new Uint8Array(n));
    this.stale = resize(this.stale, (n) => new Uint8Array(n));
  }

  /** Marks whether a record's journaled kept fields are not the ones the current job keeps. */
  markKeep(seq: number, stale: boolean): void {
    this.grow(seq);
    this.stale[seq] = stale ? 1 : 0;
  }

  /** Whether a done record's kept fields must be read again from the input. */
  staleKeep(seq: number): boolean {
    return seq < this.stale.length && this.stale[seq] === 1;
  }

  add(seq: number, hash: string): void {
    this.grow(seq);
    if (!this.present[seq]) this.size++;
    this.present[seq] = 1;
    this.high[seq] = Number.parseInt(hash.slice(0, 8), 16) >>> 0;
    this.low[seq] = Number.parseInt(hash.slice(8, 16), 16) >>> 0;
  }

  /** Whether `seq` was answered for this same request. */
  has(seq: number, hash: string): boolean {
    return (
      seq < this.present.length &&
      this.present[seq] === 1 &&
      this.high[seq] === Number.parseInt(hash.slice(0, 8), 16) >>> 0 &&
      this.low[seq] === Number.parseInt(hash.slice(8, 16), 16) >>> 0
    );
  }
}

export class Journal {
  private constructor(
    readonly path: string,
    private readonly fd: number,
  ) {}

  /**
   * Opens (or creates) a journal, dropping a half-written last line left by a
   * crash, and returns what earlier runs finished. `input` binds the journal
   * to one input (another is refused). `keep` is the current job's kept
   * fields: records answered while the job kept others are marked in
   * `done.staleKeep`, so the run journals their kept fields anew.
   */
  static async open(path: string, input?: string, keep: readonly string[] = []): Promise<{ journal: Journal; done: DoneIndex; runs: RunEntry[] }> {
    const done = new DoneIndex();
    const wanted = JSON.stringify(keep);
    const runs: RunEntry[] = [];
    let belongs: string | undefined;
    let records = 0;
    const existed = existsSync(path) && statSync(path).size > 0;
    if (existed) {
      repairTail(path);
      for await (const entry of readJournal(path)) {
        if (entry.k === "answer" || entry.k === "error") records++;
        if (entry.k === "answer") {
          done.add(entry.seq, entry.h);
          done.markKeep(entry.seq, JSON.stringify(Object.keys(entry.keep ?? {})) !== wanted);
        } else if (entry.k === "keep") done.markKeep(entry.seq, JSON.stringify(Object.keys(entry.keep)) !== wanted);
        else if (entry.k === "run") runs.push(entry);
        else if (entry.k === "input") belongs ??= entry.input;
      }
    }
    if (input !== undefined && belongs !== undefined && belongs !== input && records === 0) {
      // A run that failed before finishing any record (a wrong input, a store that was down) binds nothing.
      truncateSync(path, 0);
      belongs = undefined;
      runs.length = 0;
    }
    if (input !== undefined && belongs !== undefined && belongs !== input) {
      throw new JournalMismatchError(
        `the journal ${path} holds the records of ${belongs}, not of ${input}: rerun with that input to resume it, pass --journal (or -o) to start another, or delete it to start over`,
      );
    }
    const journal = new Journal(path, openSync(path, "a"));
    if (input !== undefined && belongs === undefined) journal.append({ k: "input", input });
    return { journal, done, runs };
  }

  append(entry: Entry): void {
    writeSync(this.fd, `${JSON.stringify(entry)}\n`);
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** Truncates a journal after its last complete line (a crash can leave half a line). */
function repairTail(path: string): void {
  const size = statSync(path).size;
  if (size === 0) return;
  const fd = openSync(path, "r");
  try {
    const tail = Buffer.alloc(Math.min(size, 1 << 20));
    let position = size;
    // Walk back to the last newline.
    while (position > 0) {
      const length = Math.min(tail.length, position);
      position -= length;
      const bytesRead = readSync(fd, tail, 0, length, position);
      const at = tail.subarray(0, bytesRead).lastIndexOf(0x0a);
      if (at >= 0) {
        const end = position + at + 1;
        if (end < size) truncateSync(path, end);
        return;
      }
    }
    truncateSync(path, 0);
  } finally {
    closeSync(fd);
  }
}

/** Every entry of a journal, in order; lines that do not parse are skipped. */
export async function* readJournal(path: string): AsyncGenerator<Entry> {
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line) continue;
    try {
      yield JSON.parse(line) as Entry;
    } catch {
      // A line torn by a crash: its record was not finished and will run again.
    }
  }
}
