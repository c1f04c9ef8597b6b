/**
 * A question's answered rows as assess, calibrate and thresholds hold them:
 * typed arrays that grow, with each row's record key, so that every
 * statistic can be computed in key order (see resample.ts).
 */
import type { Scored } from "./metrics.js";
import { keyOrder, recordKey, type RowKeys } from "./resample.js";

/** A copy of `a` at `length`, the new tail filled with `fill`. */
function resized<T extends Float64Array | Int32Array | Uint32Array>(a: T, length: number, fill: number): T {
  const b = new (a.constructor as new (n: number) => T)(length);
  b.fill(fill);
  b.set(a);
  return b;
}

/** A question's rows in key order (see resample.ts): what every statistic is computed on. */
export interface KeyedRows {
  s: Scored;
  /** Label mass per row, -1 where unknown; empty when no row carries one. */
  mass: Float64Array;
  keys: RowKeys;
}

/** Growable rows of k probabilities plus a gold class and a record key each. */
export class Rows {
  n = 0;
  p: Float64Array;
  y: Int32Array;
  /** Label mass per row, -1 where unknown; empty until a row carries one. */
  mass = new Float64Array(0);
  /** Each row's gold row (an index into `Joined.goldIds`), -1 when not joined from gold: names a row in a suspects list. */
  ref: Int32Array;
  /** The two halves of each row's record key. */
  hi: Uint32Array;
  lo: Uint32Array;
  constructor(readonly k: number) {
    this.p = new Float64Array(256 * k);
    this.y = new Int32Array(256);
    this.ref = new Int32Array(256);
    this.hi = new Uint32Array(256);
    this.lo = new Uint32Array(256);
  }
  /** Adds a row: its distribution, gold class, label mass (-1 when unknown), record id and gold row (-1 when none). */
  push(dist: readonly number[], y: number, mass: number, id: string, ref = -1): void {
    if (this.n === this.y.length) {
      this.p = resized(this.p, this.p.length * 2, 0);
      this.y = resized(this.y, this.y.length * 2, 0);
      this.ref = resized(this.ref, this.y.length, -1);
      this.hi = resized(this.hi, this.y.length, 0);
      this.lo = resized(this.lo, this.y.length, 0);
      if (this.mass.length > 0) this.mass = resized(this.mass, this.y.length, -1);
    }
    for (let j = 0; j < this.k; j++) this.p[this.n * this.k + j] = dist[j] as number;
    this.y[this.n] = y;
    this.ref[this.n] = ref;
    const key = recordKey(id);
    this.hi[this.n] = key[0];
    this.lo[this.n] = key[1];
    if (mass >= 0 && this.mass.length === 0) this.mass = new Float64Array(this.y.length).fill(-1);
    if (this.mass.length > 0) this.mass[this.n] = mass;
    this.n++;
  }
  /** The rows as they came (order-dependent: for label-free uses that only average). */
  scored(): Scored {
    return { n: this.n, k: this.k, p: this.p.subarray(0, this.n * this.k), y: this.y.subarray(0, this.n) };
  }
  /** A copy of the rows in key order, or in `order` (indices into the rows) when given. */
  keyed(order: Int32Array = keyOrder({ hi: this.hi, lo: this.lo }, this.n)): KeyedRows {
    const { k } = this;
    const n = order.length;
    const p = new Float64Array(n * k);
    const y = new Int32Array(n);
    const hi = new Uint32Array(n);
    const lo = new Uint32Array(n);
    const mass = new Float64Array(this.mass.length ? n : 0);
    for (let to = 0; to < n; to++) {
      const from = order[to] as number;
      for (let j = 0; j < k; j++) p[to * k + j] = this.p[from * k + j] as number;
      y[to] = this.y[from] as number;
      hi[to] = this.hi[from] as number;
      lo[to] = this.lo[from] as number;
    }
    for (let to = 0; to < mass.length; to++) mass[to] = this.mass[order[to] as number] as number;
    return { s: { n, k, p, y }, mass, keys: { hi, lo } };
  }
}
