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

/** murmur3's 32-bit finaliser: a bijection whose every input bit moves every output bit. */
function fmix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** One 32-bit hash of a string's UTF-16 code units, from `seed` (FNV-1a steps, then the finaliser). */
function hashString(text: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return fmix32(h ^ text.length);
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
 * every computation over a question's rows uses. An LSD radix sort, 16 bits a
 * pass and stable: four linear passes, where a comparison sort of a million
 * rows compares about twenty million times.
 */
export function keyOrder(keys: RowKeys, n: number): Int32Array {
  let order = Int32Array.from({ length: n }, (_, i) => i);
  let next = new Int32Array(n);
  const count = new Int32Array(65537);
  for (const [half, shift] of [
    [keys.lo, 0],
    [keys.lo, 16],
    [keys.hi, 0],
    [keys.hi, 16],
  ] as const) {
    count.fill(0);
    for (let i = 0; i < n; i++) count[(((half[i] as number) >>> shift) & 0xffff) + 1]! += 1;
    for (let d = 0; d < 65536; d++) count[d + 1]! += count[d] as number;
    for (let i = 0; i < n; i++) {
      const row = order[i] as number;
      next[count[((half[row] as number) >>> shift) & 0xffff]!++] = row;
    }
    [order, next] = [next, order];
  }
  return order;
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
 * Bootstrap draw `draw`: how many times each row is taken, Poisson(1) from a
 * hash of its key (the Poisson bootstrap, the multinomial's large-n limit).
 * Each row's weight depends on its id and the seed alone, so reordering,
 * adding or removing other rows leaves it as it is. Integer work only.
 */
export function keyedWeights(keys: RowKeys, n: number, seed: number, draw: number, into: Float64Array): Float64Array {
  const stream = streamOf(seed, PURPOSE.bootstrap, draw);
  const { hi, lo } = keys;
  for (let i = 0; i < n; i++) {
    const u = keyedBits(hi[i] as number, lo[i] as number, stream);
    let k = 0;
    while (k < POISSON_CDF.length && u > (POISSON_CDF[k] as number)) k++;
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
