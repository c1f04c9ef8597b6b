/**
 * The hashes of record keys: which shard a record belongs to, its slot in the
 * journal's index, and the seeded draws of the quality tools. Fast, stable
 * across releases (a journal and a shard assignment depend on them), not
 * cryptographic.
 */

/** FNV-1a of a string's UTF-16 code units from `seed` (0: plain FNV-1a), as an unsigned 32-bit integer. */
export function fnv1a(text: string, seed = 0): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** murmur3's 32-bit finaliser: a bijection whose every input bit moves every output bit. */
export function fmix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** FNV-1a with the finaliser after it (FNV's low bits mix poorly for short, similar keys), unsigned 32-bit. */
export function mixedHash(text: string): number {
  return fmix32(fnv1a(text));
}
