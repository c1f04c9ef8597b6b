/**
 * The run journal: one JSON line per finished record, appended with a
 * synchronous write the moment the record finishes. It is the run's only
 * state. A killed run (even kill -9) loses at most the records in flight;
 * rerunning reads the journal and skips what it holds. Outputs are written
 * from the journal, so they never hold a record twice.
 */
import { closeSync, createReadStream, existsSync, fstatSync, ftruncateSync, openSync, readSync, statSync, truncateSync, writeSync } from "node:fs";
import type { Answer, Usage } from "../../api/schema.js";
import type { BillingSums } from "../../api/billing.js";
import { InvocationError } from "../../api/errors.js";
import { JournalIndex, keptHash } from "./index.js";
import { scrub } from "../../logging/secrets.js";

export interface AnswerEntry {
  k: "answer";
  seq: number;
  line: number;
  source: string;
  id: string;
  /**
   * First 16 hex digits of the request hash (`requestHash`: what decides the
   * answer). With the id, it is what the entry is found by: an entry counts
   * for a record only while the record asks exactly this.
   */
  h: string;
  model: string;
  /** The prompt format the answers were read from (`Evaluation.promptFormat`); absent in entries written before formats were named. */
  prompt_format?: string;
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
  /** What the requests answered since the previous entry were billed, against their characters (journals before it have none). */
  billing?: BillingSums;
}

/**
 * Kept fields re-read from the input for a record answered by an earlier run
 * whose job kept other fields, or whose kept values were edited since (they
 * are not part of the request): the output holds the kept values of the
 * input as read now, without asking the model again.
 */
export interface KeepEntry {
  k: "keep";
  seq: number;
  /** The record's id and request hash (absent in journals written before entries were keyed by them). */
  id?: string;
  h?: string;
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

/** What opening a journal finds: the journal to append to, the index of what earlier runs finished, and their spending. */
export interface OpenedJournal {
  journal: Journal;
  index: JournalIndex;
  runs: RunEntry[];
}

/** How a journal is opened for a run. */
export interface JournalOptions {
  /** The input the journal belongs to (another is refused). */
  input?: string | undefined;
  /** Whether the job's records have ids (see `JournalIndex`). */
  byId?: boolean | undefined;
}

export class Journal {
  private constructor(
    readonly path: string,
    private readonly fd: number,
    /** Bytes in the file: where the next entry goes. */
    private size: number,
  ) {}

  /**
   * Opens (or creates) a journal, dropping a half-written last line left by a
   * crash, and indexes what earlier runs finished by record and request
   * (`JournalIndex`). `input` binds the journal to one input (another is
   * refused). The index holds a hash of each answer's kept fields, so a run
   * whose job keeps other fields, or whose input's kept values were edited,
   * journals them anew (`JournalIndex.staleKeep`).
   */
  static async open(path: string, options: JournalOptions = {}): Promise<OpenedJournal> {
    const { input } = options;
    const index = new JournalIndex(options.byId ?? true);
    const runs: RunEntry[] = [];
    let belongs: string | undefined;
    let records = 0;
    if (existsSync(path) && statSync(path).size > 0) {
      repairTail(path);
      for await (const { entry, offset } of entriesWithOffsets(path)) {
        if (entry.k === "answer" || entry.k === "error") records++;
        if (entry.k === "run") runs.push(entry);
        else if (entry.k === "input") belongs ??= entry.input;
        else indexEntry(index, entry, offset, false);
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
    const fd = openSync(path, "a");
    const journal = new Journal(path, fd, fstatSync(fd).size);
    if (input !== undefined && belongs === undefined) journal.append({ k: "input", input });
    return { journal, index, runs };
  }

  /**
   * Appends one entry with a synchronous write and returns where it lies. A
   * short write (a disk that filled mid-line) is cut off again and thrown as
   * the disk's error: the journal never holds half an entry followed by more.
   */
  append(entry: Entry): number {
    // A failure's message may quote what an endpoint answered: scrubbed on its way in (secrets.ts).
    const safe = entry.k === "error" ? { ...entry, message: scrub(entry.message) } : entry;
    const line = Buffer.from(`${JSON.stringify(safe)}\n`);
    const offset = this.size;
    const written = writeSync(this.fd, line);
    if (written !== line.length) {
      ftruncateSync(this.fd, offset);
      throw Object.assign(new Error(`ENOSPC: no space left on device, write (${written} of ${line.length} bytes of a journal entry)`), {
        code: "ENOSPC",
        path: this.path,
      });
    }
    this.size += written;
    return offset;
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** Notes a journaled record's entry in the index (`now`: written by this run). */
export function indexEntry(index: JournalIndex, entry: AnswerEntry | ErrorEntry | KeepEntry, offset: number, now: boolean): void {
  if (entry.k === "keep") {
    // Kept fields journaled again for an answered record; journals before keys carried only the record's position.
    if (entry.id === undefined || entry.h === undefined) return;
    const key = index.key(entry.id, entry.h);
    index.rekept.set(key, offset);
    index.markKeep(key, keptHash(entry.keep));
    return;
  }
  const key = index.key(entry.id, entry.h);
  if (entry.k === "error") return index.failed(key, offset, now);
  index.answered(key, offset, entry.dedup_of !== undefined, entry.usage);
  index.markKeep(key, keptHash(entry.keep));
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
  for await (const { entry } of entriesWithOffsets(path)) yield entry;
}

/** Every entry of a journal with the byte offset of its line; lines that do not parse (torn by a crash, garbage) are skipped. */
export async function* entriesWithOffsets(path: string): AsyncGenerator<{ entry: Entry; offset: number }> {
  for await (const { text, offset } of linesWithOffsets(path)) {
    try {
      yield { entry: JSON.parse(text) as Entry, offset };
    } catch {
      // A line torn by a crash: its record was not finished and will run again.
    }
  }
}

/** Every complete line of a file with its byte offset (a last line without its newline was torn by a crash: left out). */
async function* linesWithOffsets(path: string): AsyncGenerator<{ text: string; offset: number }> {
  let carry: Buffer = Buffer.alloc(0);
  let base = 0; // file offset of carry[0]
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    const buf = carry.length > 0 ? Buffer.concat([carry, chunk]) : chunk;
    let start = 0;
    for (let nl = buf.indexOf(0x0a, start); nl >= 0; nl = buf.indexOf(0x0a, start)) {
      if (nl > start) yield { text: buf.toString("utf8", start, nl), offset: base + start };
      start = nl + 1;
    }
    // Copied: a slice would pin the whole chunk while a long line accumulates.
    carry = Buffer.from(buf.subarray(start));
    base += start;
  }
}
