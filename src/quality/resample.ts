/**
 * Order-free randomness for the quality tools: every random choice about a
 * row (its cross-validation fold, how often a bootstrap draw takes it) is a
 * seeded hash of the row's record id, never of its position. The same gold
 * rows and answers in any order then give the same folds, the same draws and
 * the same numbers; rows are also put in key order before anything sums over
 * them, so the numbers agree to the bit.
 *
 * Pure functions, no I/O.
 */
import { fmix32, fnv1a } from "../records/hash.js";

/** One 32-bit hash of a string's UTF-16 code units, from `seed` (FNV-1a steps, then the finaliser). */
function hashString(text: string, seed: number): number {
  return fmix32(fnv1a(text, seed) ^ text.length);
}

/**
 * Per-row keys: two independent 32-bit hashes of each record id. 64 bits make
 * a shared key among a million ids a one-in-30-million event; such a pair
 * would keep the order the rows came in.
 */
export interface RowKeys {
  hi: Uint32Array;
  lo: Uint32Array;
}

/** The key of one record id. */
export function recordKey(id: string): [number, number] {
  return [hashString(id, 0x9e3779b9), hashString(id, 0x7f4a7c15)];
}

/**
 * Row indices in key order (hi, then lo, then the order given): the one order
 * every computation over a question's rows uses.
 */
export function keyOrder(keys: RowKeys, n: number): Int32Array {
  return order64(keys.hi, keys.lo, undefined, n);
}

/**
 * Indices ordered by the unsigned 64-bit keys (hi[i], lo[i]), ties in the
 * order of `from` (default: index order). An LSD radix sort, 16 bits a pass
 * and stable, that carries each row's key along so every pass reads memory in
 * order: four linear passes, where a comparison sort of a million rows
 * compares about twenty million times (0.5 s against 40 ms).
 */
export function order64(hi: Uint32Array, lo: Uint32Array, from?: Int32Array, n = from ? from.length : hi.length): Int32Array {
  let idx = new Int32Array(n);
  let kh = new Uint32Array(n);
  let kl = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    const row = from ? (from[i] as number) : i;
    idx[i] = row;
    kh[i] = hi[row] as number;
    kl[i] = lo[row] as number;
  }
  let nextIdx = new Int32Array(n);
  let nextHi = new Uint32Array(n);
  let nextLo = new Uint32Array(n);
  const count = new Int32Array(65537);
  for (let pass = 0; pass < 4; pass++) {
    const shift = pass % 2 === 0 ? 0 : 16;
    const half = pass < 2 ? kl : kh;
    count.fill(0);
    for (let i = 0; i < n; i++) count[(((half[i] as number) >>> shift) & 0xffff) + 1]! += 1;
    // A pass every row agrees on (the top bits of floats in [0, 1] often do) moves nothing.
    if (count.includes(n) && n > 0) continue;
    for (let d = 0; d < 65536; d++) count[d + 1]! += count[d] as number;
    for (let i = 0; i < n; i++) {
      const to = count[((half[i] as number) >>> shift) & 0xffff]!++;
      nextIdx[to] = idx[i] as number;
      nextHi[to] = kh[i] as number;
      nextLo[to] = kl[i] as number;
    }
    [idx, nextIdx] = [nextIdx, idx];
    [kh, nextHi] = [nextHi, kh];
    [kl, nextLo] = [nextLo, kl];
  }
  return idx;
}

/** What a stream of keyed draws is for: the same seed gives unrelated numbers to different purposes. */
export const PURPOSE = { bootstrap: 1, folds: 2 } as const;

/** The 32-bit stream id of draw `index` of a purpose under a seed. */
export function streamOf(seed: number, purpose: number, index: number): number {
  return fmix32(fmix32(fmix32(seed >>> 0) ^ Math.imul(purpose, 0x27d4eb2f)) ^ Math.imul(index + 1, 0x165667b1));
}

/** A row's 32-bit uniform integer in a stream: a hash of its key and the stream. */
export function keyedBits(hi: number, lo: number, stream: number): number {
  return fmix32(fmix32(lo ^ stream) ^ hi ^ Math.imul(stream, 0x9e3779b9));
}

/** P(K <= k) for K ~ Poisson(1), k = 0..11, scaled to 32-bit integers. */
const POISSON_CDF = (() => {
  const out: number[] = [];
  let p = Math.exp(-1);
  let cdf = p;
  for (let k = 0; k < 12; k++) {
    out.push(Math.min(4294967295, Math.floor(cdf * 4294967296)));
    p /= k + 1;
    cdf += p;
  }
  return Uint32Array.from(out);
})();

/**
 * The Poisson draw of each 65,536-wide slice of 32-bit uniforms, or 255 for
 * the dozen slices a CDF step cuts: one table load per row in place of a
 * search whose branches a random key mispredicts (4-5x faster per draw).
 */
const POISSON_SLICE = (() => {
  const draw = (u: number) => {
    let k = 0;
    while (k < POISSON_CDF.length && u > (POISSON_CDF[k] as number)) k++;
    return k;
  };
  const out = new Uint8Array(65536);
  for (let slice = 0; slice < 65536; slice++) {
    const first = draw(slice * 65536);
    out[slice] = first === draw(slice * 65536 + 65535) ? first : 255;
  }
  return out;
})();

/**
 * Bootstrap draw `draw`: how many times each row is taken, Poisson(1) from a
 * hash of its key (the Poisson bootstrap, the multinomial's large-n limit).
 * Each row's weight depends on its id and the seed alone, so reordering,
 * adding or removing other rows leaves it as it is. Integer work only; a
 * weight above 11 has probability 1e-9 and is cut to 12.
 */
export function keyedWeights(keys: RowKeys, n: number, seed: number, draw: number, into: Uint8Array): Uint8Array {
  const stream = streamOf(seed, PURPOSE.bootstrap, draw);
  const mix = Math.imul(stream, 0x9e3779b9);
  const { hi, lo } = keys;
  for (let i = 0; i < n; i++) {
    // keyedBits, inlined: this loop runs once per row per draw (600 million times for three questions of a million rows).
    let h = ((lo[i] as number) ^ stream) >>> 0;
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    h ^= (hi[i] as number) ^ mix;
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h = (h ^ (h >>> 16)) >>> 0;
    let k = POISSON_SLICE[h >>> 16] as number;
    if (k === 255) {
      k = 0;
      while (k < POISSON_CDF.length && h > (POISSON_CDF[k] as number)) k++;
    }
    into[i] = k;
  }
  return into;
}

/**
 * Cross-validation folds of equal size (within one): rows ranked by a seeded
 * hash of their key, the rank modulo `folds`. Rows are expected in key order,
 * which breaks the (rare) ties of the hash.
 */
export function keyedFolds(keys: RowKeys, n: number, seed: number, folds: number): Int32Array {
  const stream = streamOf(seed, PURPOSE.folds, 0);
  const bits = Uint32Array.from({ length: n }, (_, i) => keyedBits(keys.hi[i] as number, keys.lo[i] as number, stream));
  const order = Int32Array.from({ length: n }, (_, i) => i).sort((a, b) => (bits[a] as number) - (bits[b] as number) || a - b);
  const fold = new Int32Array(n);
  order.forEach((row, rank) => (fold[row] = rank % folds));
  return fold;
}
