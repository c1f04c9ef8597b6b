/**
 * Trying a job on a few records before a night's run: the first N records
 * (`--limit`), or a reproducible random N (`--sample N --seed S`). Records
 * keep their place in the input (seq and line), so a later full run resumes
 * what a trial answered.
 */
import { unitHash } from "./requests.js";
import type { Source, SourceItem } from "../../records/source.js";

/** The first `n` records of a source. */
export function firstRecords(source: Source, n: number): Source {
  async function* items(): AsyncGenerator<SourceItem> {
    if (n <= 0) return;
    let taken = 0;
    for await (const item of source.items) {
      yield item;
      if (++taken >= n) return;
    }
  }
  return { ...source, name: `${source.name} (first ${n})`, items: items(), selection: `--limit ${n}` };
}

/**
 * A uniform random sample of `n` records without replacement, the same for
 * the same seed: each record gets a key hashed from the seed and its place,
 * and the `n` smallest keys win. The whole input is read; the `n` records
 * chosen are held in memory and then processed in input order.
 */
export function sampleRecords(source: Source, n: number, seed: number): Source {
  async function* items(): AsyncGenerator<SourceItem> {
    let kept: { key: number; item: SourceItem }[] = [];
    let bound = Infinity;
    for await (const item of source.items) {
      const key = unitHash(`${seed}:${item.seq}`);
      if (key >= bound) continue;
      kept.push({ key, item });
      if (kept.length >= 2 * n + 64) {
        kept.sort((a, b) => a.key - b.key);
        kept = kept.slice(0, n);
        bound = kept[n - 1]?.key ?? Infinity;
      }
    }
    kept.sort((a, b) => a.key - b.key);
    const chosen = kept.slice(0, n).map((k) => k.item);
    chosen.sort((a, b) => a.seq - b.seq);
    yield* chosen;
  }
  return { ...source, name: `${source.name} (sample of ${n}, seed ${seed})`, items: items(), selection: `--sample ${n}` };
}
