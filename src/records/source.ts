/** What every input is: a stream of records with progress (the error that ends one is `SourceError`, api/verdict.ts). */

/** One input record, or why a line could not be read. `seq` numbers records across the whole input. */
export type SourceItem = { seq: number; line: number; source: string; record: unknown } | { seq: number; line: number; source: string; error: string };

export interface Source {
  name: string;
  items: AsyncIterable<SourceItem>;
  /** Bytes read so far and the total when known, for progress. */
  progress(): { bytes: number; total: number | undefined };
  /** How a run picked part of the input (`--limit 100`, `--sample 50`), when it did: the records it did not pick are not gone from the input. */
  selection?: string | undefined;
}

/** The value at a dotted path (`a.b.0.c`); numeric segments index arrays. */
export function valueAt(record: unknown, path: string): unknown {
  let node = record;
  for (const part of path.split(".")) {
    if (node === null || typeof node !== "object") return undefined;
    node = Array.isArray(node) ? node[Number(part)] : Object.hasOwn(node, part) ? (node as Record<string, unknown>)[part] : undefined;
  }
  return node;
}
