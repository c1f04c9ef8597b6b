/**
 * The records of the input as this run read them, in input order: for each,
 * its key in the journal index, its line and its source (the file or S3 key
 * it came from). The outputs are exactly these records, in this order, each
 * with the entry its key finds; the run is done only when every one of them
 * has a result. Compact: 4 bytes a record, plus one run of (first record,
 * line offset, source) wherever the line stops following the record number
 * (a new file of an S3 prefix, a blank line, a CSV cell over several lines).
 */

export interface ReadRecord {
  /** The record's key in the journal index. */
  key: number;
  line: number;
  source: string;
}

export class InputOrder {
  private keys = new Uint32Array(1024);
  private runFrom = new Uint32Array(16);
  private runDelta = new Float64Array(16);
  private runSource = new Uint32Array(16);
  private runs = 0;
  private readonly sources: string[] = [];
  /** Records read. */
  length = 0;

  /** Appends a record read. */
  push(key: number, line: number, source: string): void {
    const i = this.length++;
    if (i >= this.keys.length) this.keys = grown(this.keys, this.keys.length * 2);
    this.keys[i] = key;
    const last = this.runs - 1;
    const delta = line - i;
    if (last >= 0 && this.runDelta[last] === delta && this.sources[this.runSource[last] as number] === source) return;
    if (this.runs >= this.runFrom.length) {
      const n = this.runFrom.length * 2;
      this.runFrom = grown(this.runFrom, n);
      this.runDelta = grownFloat(this.runDelta, n);
      this.runSource = grown(this.runSource, n);
    }
    let s = this.sources.length - 1;
    if (this.sources[s] !== source) {
      this.sources.push(source);
      s = this.sources.length - 1;
    }
    this.runFrom[this.runs] = i;
    this.runDelta[this.runs] = delta;
    this.runSource[this.runs] = s;
    this.runs++;
  }

  /** The key of record `i`. */
  keyAt(i: number): number {
    return this.keys[i] as number;
  }

  /** Every record read, in input order. */
  *records(): Generator<ReadRecord> {
    let run = 0;
    for (let i = 0; i < this.length; i++) {
      while (run + 1 < this.runs && (this.runFrom[run + 1] as number) <= i) run++;
      yield { key: this.keys[i] as number, line: i + (this.runDelta[run] as number), source: this.sources[this.runSource[run] as number] as string };
    }
  }
}

function grown(old: Uint32Array, n: number) {
  const next = new Uint32Array(n);
  next.set(old);
  return next;
}

function grownFloat(old: Float64Array, n: number) {
  const next = new Float64Array(n);
  next.set(old);
  return next;
}
