/**
 * The journal in input order. The journal is appended in completion order;
 * outputs must come in input order (the same input gives the same file,
 * whatever the concurrency or a crash did). One pass over the journal notes
 * where each record's latest entry lies (byte offset and length, in typed
 * arrays: 13 bytes a record, 13 MB for a million), then the entries are read
 * back by seq with positioned reads through a window: completion order is
 * near input order (at most `--concurrency` apart, retries aside), so most
 * reads are served from the window and the file is read about once more.
 */
import { closeSync, createReadStream, openSync, readSync } from "node:fs";
import type { AnswerEntry, Entry, ErrorEntry } from "../state/journal.js";

const NONE = 0;
const ANSWER = 1;
const ERROR = 2;

/** Where the latest answer (else the latest error) of each seq lies in the journal. */
class Positions {
  offset = new Float64Array(1024);
  length = new Uint32Array(1024);
  kind = new Uint8Array(1024);
  /** One past the highest seq seen. */
  end = 0;

  private grow(seq: number): void {
    if (seq < this.kind.length) return;
    let n = this.kind.length;
    while (n <= seq) n *= 2;
    const offset = new Float64Array(n);
    offset.set(this.offset);
    const length = new Uint32Array(n);
    length.set(this.length);
    const kind = new Uint8Array(n);
    kind.set(this.kind);
    Object.assign(this, { offset, length, kind });
  }

  /** An answer replaces anything earlier; an error replaces an earlier error, never an answer (a record answered after failing counts as answered). */
  note(seq: number, kind: typeof ANSWER | typeof ERROR, offset: number, length: number): void {
    this.grow(seq);
    if (kind === ERROR && this.kind[seq] === ANSWER) return;
    this.kind[seq] = kind;
    this.offset[seq] = offset;
    this.length[seq] = length;
    if (seq >= this.end) this.end = seq + 1;
  }
}

/** Every complete line of a file with its byte offset and length (without the newline). */
async function* linesWithOffsets(path: string): AsyncGenerator<{ text: string; offset: number; length: number }> {
  let carry: Buffer = Buffer.alloc(0);
  let base = 0; // file offset of carry[0]
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    const buf = carry.length > 0 ? Buffer.concat([carry, chunk]) : chunk;
    let start = 0;
    for (let nl = buf.indexOf(0x0a, start); nl >= 0; nl = buf.indexOf(0x0a, start)) {
      if (nl > start) yield { text: buf.toString("utf8", start, nl), offset: base + start, length: nl - start };
      start = nl + 1;
    }
    // Copied: a slice would pin the whole chunk while a long line accumulates.
    carry = Buffer.from(buf.subarray(start));
    base += start;
  }
  // A last line without a newline was torn by a crash: its record was not finished.
}

/** Reads byte ranges of a file, mostly forward, through one window. */
class WindowReader {
  private window = Buffer.alloc(1 << 20);
  private from = 0;
  private to = 0;
  constructor(private readonly fd: number) {}

  read(offset: number, length: number): string {
    if (offset < this.from || offset + length > this.to) {
      if (length > this.window.length) this.window = Buffer.alloc(length);
      this.from = offset;
      this.to = offset + readSync(this.fd, this.window, 0, this.window.length, offset);
    }
    return this.window.toString("utf8", offset - this.from, offset - this.from + length);
  }
}

/** A journal indexed by seq: what `writeOutputs` reads, in input order. */
export class OrderedJournal {
  private constructor(
    private readonly path: string,
    private readonly positions: Positions,
  ) {}

  /**
   * Indexes a journal; `visit` sees every entry once, in journal order
   * (for what does not depend on order: kept-field kinds, rewritten kept fields).
   */
  static async index(path: string, visit: (entry: Entry, offset: number) => void): Promise<OrderedJournal> {
    const positions = new Positions();
    for await (const { text, offset, length } of linesWithOffsets(path)) {
      let entry: Entry;
      try {
        entry = JSON.parse(text) as Entry;
      } catch {
        continue; // a line torn by a crash: its record was not finished and ran again
      }
      if (entry.k === "answer") positions.note(entry.seq, ANSWER, offset, length);
      else if (entry.k === "error") positions.note(entry.seq, ERROR, offset, length);
      visit(entry, offset);
    }
    return new OrderedJournal(path, positions);
  }

  /** Each record's latest answer, or its latest error when it has no answer, in seq (input) order; `offset` is where the entry lies. */
  *records(): Generator<{ entry: AnswerEntry | ErrorEntry; offset: number }> {
    const { offset, length, kind, end } = this.positions;
    const fd = openSync(this.path, "r");
    try {
      const reader = new WindowReader(fd);
      for (let seq = 0; seq < end; seq++) {
        if (kind[seq] === NONE) continue;
        const at = offset[seq] as number;
        yield { entry: JSON.parse(reader.read(at, length[seq] as number)) as AnswerEntry | ErrorEntry, offset: at };
      }
    } finally {
      closeSync(fd);
    }
  }

  /** The id of the record `seq` (for journals whose `dedup_of` names a seq). */
  idOf(seq: number): string | undefined {
    const { offset, length, kind } = this.positions;
    if (seq < 0 || seq >= kind.length || kind[seq] === NONE) return undefined;
    const fd = openSync(this.path, "r");
    try {
      const buf = Buffer.alloc(length[seq] as number);
      readSync(fd, buf, 0, buf.length, offset[seq] as number);
      return (JSON.parse(buf.toString("utf8")) as AnswerEntry | ErrorEntry).id;
    } finally {
      closeSync(fd);
    }
  }
}
