/**
 * Ids that repeat in a run's input. Every record is still answered and
 * written (the rows differ by line, and may differ in content); the run
 * reports how many rows repeat an earlier id, with the first examples, and
 * the quality tools key rows by id and line.
 *
 * A million ids as JavaScript strings in a Set would take about 60 MB; this
 * keeps a 64-bit hash of each id and the line and file it was first seen on
 * in typed arrays (16 bytes a slot, at most half full: 32 MB for a million
 * ids, about what the strings alone would cost in half of them). The files
 * (the objects of an S3 prefix) are kept once each: a repeat across two of
 * them names both, where "lines 1 and 1" would say nothing. Two different ids
 * share a 64-bit hash with odds of about 3e-8 in a million: reported as a
 * repeat then, never as a lost row. (What the summary says about repeats is
 * records/usage.ts.)
 */
import type { DuplicateIds } from "../../records/usage.js";

/** How many example ids a run reports. */
export const DUPLICATE_EXAMPLES = 5;

/** Two 32-bit FNV-1a hashes of the UTF-16 code units with different offsets: 64 bits in all. */
function hash64(id: string): [number, number] {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
  }
  a >>>= 0;
  b >>>= 0;
  // (0, 0) marks an empty slot.
  return a === 0 && b === 0 ? [1, 0] : [a, b];
}

/** Watches ids go by in input order and counts the repeats. */
export class DuplicateIdWatch {
  private hi = new Uint32Array(1 << 12);
  private lo = new Uint32Array(1 << 12);
  private firstLine = new Uint32Array(1 << 12);
  private firstSource = new Uint32Array(1 << 12);
  private readonly sources: string[] = [];
  private readonly sourceIndex = new Map<string, number>();
  private size = 0;
  private readonly found: DuplicateIds = { rows: 0, examples: [] };

  /** Notes one row (its id, line and file); true when an earlier row had the same id. */
  see(id: string, line: number, source = ""): boolean {
    if (this.size * 2 >= this.hi.length) this.rehash();
    const [h, l] = hash64(id);
    const at = this.slot(h, l);
    if (this.hi[at] === 0 && this.lo[at] === 0) {
      this.hi[at] = h;
      this.lo[at] = l;
      this.firstLine[at] = line;
      this.firstSource[at] = this.indexOf(source);
      this.size++;
      return false;
    }
    this.found.rows++;
    if (this.found.examples.length < DUPLICATE_EXAMPLES && !this.found.examples.some((e) => e.id === id)) {
      const first = this.sources[this.firstSource[at] as number] ?? "";
      // Two files (an S3 prefix's objects): both named, as their lines alone would not tell them apart.
      const files = first === source ? {} : { first_source: first, source };
      this.found.examples.push({ id, first_line: this.firstLine[at] as number, line, ...files });
    }
    return true;
  }

  private indexOf(source: string): number {
    let index = this.sourceIndex.get(source);
    if (index === undefined) {
      index = this.sources.push(source) - 1;
      this.sourceIndex.set(source, index);
    }
    return index;
  }

  /** What was found; undefined when no id repeated. */
  result(): DuplicateIds | undefined {
    return this.found.rows > 0 ? this.found : undefined;
  }

  /** The slot holding (h, l), or the empty one where it goes (linear probing). */
  private slot(h: number, l: number): number {
    const mask = this.hi.length - 1;
    let at = (l ^ Math.imul(h, 0x9e3779b1)) & mask;
    while (!(this.hi[at] === 0 && this.lo[at] === 0) && !(this.hi[at] === h && this.lo[at] === l)) at = (at + 1) & mask;
    return at;
  }

  private rehash(): void {
    const { hi, lo, firstLine, firstSource } = this;
    this.hi = new Uint32Array(hi.length * 2);
    this.lo = new Uint32Array(hi.length * 2);
    this.firstLine = new Uint32Array(hi.length * 2);
    this.firstSource = new Uint32Array(hi.length * 2);
    for (let i = 0; i < hi.length; i++) {
      const h = hi[i] as number;
      const l = lo[i] as number;
      if (h === 0 && l === 0) continue;
      const at = this.slot(h, l);
      this.hi[at] = h;
      this.lo[at] = l;
      this.firstLine[at] = firstLine[i] as number;
      this.firstSource[at] = firstSource[i] as number;
    }
  }
}
