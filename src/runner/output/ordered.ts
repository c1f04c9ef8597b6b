/**
 * The current input's records with their journal entries, in input order:
 * what the outputs are written from. The journal is appended in completion
 * order, across runs and versions of the job and input; the outputs hold
 * exactly the records this run read (`InputOrder`), each with the entry its
 * (id, request) key finds in the index (its answer, else the error this run
 * journaled), with the record's line and source as read now. A record that
 * repeats an earlier one (same id, same request) is written as a copy of
 * it. Entries are read back with positioned reads through a window:
 * completion order is near input order, so the file is read about once.
 */
import { closeSync, openSync, readSync } from "node:fs";
import type { InputOrder } from "../input/order.js";
import type { JournalIndex } from "../state/index.js";
import type { AnswerEntry, ErrorEntry, KeepEntry } from "../state/journal.js";
import { keptValues } from "../../records/nonfinite.js";

const ZERO_USAGE = { input_tokens: 0, output_tokens: 0 };

/** Reads lines of a file, mostly forward, through one window. */
class WindowReader {
  private window = Buffer.alloc(1 << 20);
  private from = 0;
  private to = 0;
  constructor(private readonly fd: number) {}

  /** The line starting at `offset` (without its newline). */
  line(offset: number): string {
    for (;;) {
      if (offset >= this.from && offset < this.to) {
        const end = this.window.indexOf(0x0a, offset - this.from);
        if (end >= 0 && end < this.to - this.from) return this.window.toString("utf8", offset - this.from, end);
        // The line runs past the window: read again from its start, with room for it.
        if (offset === this.from && this.to - this.from === this.window.length) this.window = Buffer.alloc(this.window.length * 2);
        else if (offset === this.from) throw new Error(`the journal ends inside an entry at byte ${offset}`);
      }
      this.from = offset;
      this.to = offset + readSync(this.fd, this.window, 0, this.window.length, offset);
    }
  }
}

/** One output row's entry: an answer or an error, with the record's line, source and id as read now. */
export type RecordEntry = AnswerEntry | ErrorEntry;

export class OrderedRecords {
  constructor(
    private readonly path: string,
    private readonly index: JournalIndex,
    private readonly order: InputOrder,
    /** Whether the job's records have an id field (without one, a record's id is its line). */
    private readonly byId: boolean,
  ) {}

  /** How many records the outputs hold. */
  get length(): number {
    return this.order.length;
  }

  /**
   * Each record of the input in order, with its entry. A key without an entry
   * is a bug (the run is done only when every record has one): it throws.
   */
  *rows(): Generator<RecordEntry> {
    const fd = openSync(this.path, "r");
    const index = this.index;
    try {
      const reader = new WindowReader(fd);
      index.forgetWritten();
      for (const { key, line, source } of this.order.records()) {
        const offset = index.offsetOf(key);
        if (offset < 0) throw new Error(`line ${line} of ${source} has no entry in the journal`);
        const entry = JSON.parse(reader.line(offset)) as RecordEntry;
        const first = index.write(key);
        const id = this.byId ? entry.id : String(line);
        Object.assign(entry, { line, source, id });
        if (entry.k === "answer") this.current(entry, key, reader, first);
        yield entry;
      }
    } finally {
      closeSync(fd);
    }
  }

  /** An answer as the current job writes it: its kept fields as journaled last, a repeated record as a copy. */
  private current(entry: AnswerEntry, key: number, reader: WindowReader, first: boolean): void {
    const rekept = this.index.rekept.get(key);
    if (rekept !== undefined && rekept > this.index.offsetOf(key)) entry.keep = (JSON.parse(reader.line(rekept)) as KeepEntry).keep;
    if (entry.keep) keptValues(entry.keep);
    // Journals before ids named the original by its position in the input.
    if (typeof entry.dedup_of === "number") entry.dedup_of = String(entry.dedup_of);
    if (first) return;
    entry.dedup_of ??= entry.id;
    entry.usage = ZERO_USAGE;
  }
}
