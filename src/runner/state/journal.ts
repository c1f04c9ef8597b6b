/**
 * The run journal: one JSON line per finished record, appended with a
 * synchronous write the moment the record finishes. It is the run's only
 * state. A killed run (even kill -9) loses at most the records in flight;
 * rerunning reads the journal and skips what it holds. Outputs are written
 * from the journal, so they never hold a record twice.
 */
import {
  closeSync,
  copyFileSync,
  createReadStream,
  existsSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  writeSync,
} from "node:fs";
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
  /** Told, in one line, when the journal held what no run wrote (it is kept aside, and its records asked again). */
  onUnreadable?: ((message: string) => void) | undefined;
}

/** The kinds of entry a run writes: a line that parses to anything else is not a journal's. */
const KINDS = new Set(["answer", "error", "run", "input", "keep"]);

/** A journal line as an entry, or undefined when no run wrote it (garbage, a line of another file). */
function parseEntry(text: string): Entry | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const entry = value as { k?: unknown; id?: unknown };
  if (typeof entry.k !== "string" || !KINDS.has(entry.k)) return undefined;
  if ((entry.k === "answer" || entry.k === "error") && typeof entry.id !== "string") return undefined;
  return value as Entry;
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
      // A tail no crash leaves (not the start of an entry: zeros a failing disk left, garbage) is not cut off in silence.
      if (garbageTail(path)) return Journal.reopenReadable(path, options);
      repairTail(path);
      let unreadable = false;
      for await (const { text, offset } of linesWithOffsets(path)) {
        const entry = parseEntry(text);
        if (entry === undefined) {
          unreadable = true;
          continue;
        }
        if (entry.k === "answer" || entry.k === "error") records++;
        if (entry.k === "run") runs.push(entry);
        else if (entry.k === "input") belongs ??= entry.input;
        else indexEntry(index, entry, offset, false);
      }
      if (unreadable) return Journal.reopenReadable(path, options);
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
   * A journal holding lines no run wrote: the file as it was is kept aside
   * (`<journal>.unreadable-<time>`), the journal keeps its readable entries,
   * and the run is told loudly, since the records of the lost lines are
   * asked (and paid) again. Then opened as any journal.
   */
  private static async reopenReadable(path: string, options: JournalOptions): Promise<OpenedJournal> {
    const keptAt = `${path}.unreadable-${new Date().toISOString().replace(/[:.]/g, "-")}`;
    copyFileSync(path, keptAt);
    const dropped = await keepReadable(path);
    options.onUnreadable?.(
      `the journal ${path} held ${dropped.lines} line${dropped.lines === 1 ? "" : "s"} (${dropped.bytes} bytes) that no run wrote (a disk or file system that failed, or another program): the records they held, if any, are asked and paid again; the journal as it was is kept at ${keptAt}`,
    );
    return Journal.open(path, options);
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

/**
 * Whether a journal ends in what no crash leaves: a run writes each entry
 * whole with one write, so a torn last line is always the start of an entry
 * (`{"k":"`); zeros (a disk that lost the data of a size it kept) or garbage
 * are not, and are set aside with a warning rather than cut off unsaid.
 */
function garbageTail(path: string): boolean {
  const size = statSync(path).size;
  const end = lastLineStart(path, size);
  if (end === size) return false;
  const fd = openSync(path, "r");
  try {
    const head = Buffer.alloc(Math.min(6, size - end));
    readSync(fd, head, 0, head.length, end);
    return !'{"k":"'.startsWith(head.toString("latin1"));
  } finally {
    closeSync(fd);
  }
}

/** Where a file's last line starts: just after its last newline (0 without one; `size` when it ends in one). */
function lastLineStart(path: string, size: number): number {
  const fd = openSync(path, "r");
  try {
    const chunk = Buffer.alloc(Math.min(size, 1 << 20));
    for (let position = size; position > 0; ) {
      const length = Math.min(chunk.length, position);
      position -= length;
      const n = readSync(fd, chunk, 0, length, position);
      const at = chunk.subarray(0, n).lastIndexOf(0x0a);
      if (at >= 0) return position + at + 1;
    }
    return 0;
  } finally {
    closeSync(fd);
  }
}

/** Rewrites a journal with only its readable entries (whole lines that parse as entries); returns what was dropped. */
async function keepReadable(path: string): Promise<{ lines: number; bytes: number }> {
  const temp = `${path}.${process.pid}.readable`;
  const fd = openSync(temp, "w");
  let kept = 0;
  try {
    for await (const { text } of linesWithOffsets(path)) {
      if (parseEntry(text) === undefined) continue;
      const line = Buffer.from(`${text}\n`);
      for (let at = 0; at < line.length; ) at += writeSync(fd, line, at, line.length - at);
      kept += line.length;
    }
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    rmSync(temp, { force: true });
    throw error;
  }
  closeSync(fd);
  const size = statSync(path).size;
  const lines = await countLines(path);
  renameSync(temp, path);
  return { lines: lines.total - lines.readable, bytes: size - kept };
}

/** The journal's lines (a last one without its newline included) and how many of them parse as entries. */
async function countLines(path: string): Promise<{ total: number; readable: number }> {
  let total = 0;
  let readable = 0;
  for await (const { text } of linesWithOffsets(path)) {
    total++;
    if (parseEntry(text) !== undefined) readable++;
  }
  // A last line without its newline: not yielded by the reader, dropped all the same.
  const size = statSync(path).size;
  if (lastLineStart(path, size) < size) total++;
  return { total, readable };
}

/** Truncates a journal after its last complete line (a crash can leave half a line). */
function repairTail(path: string): void {
  const size = statSync(path).size;
  if (size === 0) return;
  const end = lastLineStart(path, size);
  if (end < size) truncateSync(path, end);
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
