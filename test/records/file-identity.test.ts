/** A local input is one file from its first byte to its last: a change while it is read stops the read (`InputChangedError`). */
import { appendFileSync, copyFileSync, mkdtempSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { InputChangedError } from "../../src/api/verdict.js";
import { formatNamed } from "../../src/records/formats.js";
import { openLocalSource } from "../../src/records/sources.js";

const dir = mkdtempSync(join(tmpdir(), "te-identity-"));

/** An input of `n` records, large enough (about 2 MB) that it is still being read when the first record is taken. */
function bigInput(name: string, n = 20_000): string {
  const path = join(dir, name);
  writeFileSync(path, Array.from({ length: n }, (_, i) => `${JSON.stringify({ id: `r${i}`, text: `record ${i} ${"x".repeat(80)}` })}\n`).join(""));
  return path;
}

/** Takes the first record, lets `change` act on the file, then reads the rest: the records read, or the error that ended the read. */
async function readAround(path: string, format: "jsonl" | "csv" | "parquet", change: () => void): Promise<{ read: number; error?: unknown }> {
  const items = openLocalSource(path, formatNamed(format)!).items[Symbol.asyncIterator]();
  let read = 0;
  try {
    await items.next();
    read++;
    change();
    for (let next = await items.next(); !next.done; next = await items.next()) read++;
    return { read };
  } catch (error) {
    return { read, error };
  }
}

describe("a local input's identity", () => {
  it("is unchanged by a read: all records, no error", async () => {
    const r = await readAround(bigInput("same.jsonl"), "jsonl", () => undefined);
    expect(r).toEqual({ read: 20_000 });
  });

  it("appended to while it is read: InputChangedError before the read ends, naming the file and what changed", async () => {
    const path = bigInput("appended.jsonl");
    const r = await readAround(path, "jsonl", () => appendFileSync(path, '{"id":"late","text":"late"}\n'));
    expect(r.error).toBeInstanceOf(InputChangedError);
    expect((r.error as Error).message).toMatch(/appended\.jsonl changed while it was read \(it was \d+ bytes, now \d+\)/);
  });

  it("replaced by another file (a rename over it) while it is read, CSV too: InputChangedError", async () => {
    const path = join(dir, "replaced.csv");
    writeFileSync(path, `id,text\n${Array.from({ length: 20_000 }, (_, i) => `r${i},record ${i} ${"x".repeat(80)}`).join("\n")}\n`);
    const other = join(dir, "other.csv");
    writeFileSync(other, "id,text\nz,z\n");
    const r = await readAround(path, "csv", () => renameSync(other, path));
    expect(r.error).toBeInstanceOf(InputChangedError);
    expect((r.error as Error).message).toMatch(/replaced\.csv changed while it was read \(it was replaced by another file\)/);
  });

  it("a Parquet file modified while its row groups are read: InputChangedError", async () => {
    const path = join(dir, "tickets.parquet");
    copyFileSync(join(import.meta.dirname, "../../examples/data/tickets.parquet"), path);
    const r = await readAround(path, "parquet", () => appendFileSync(path, "trailing bytes"));
    expect(r.error).toBeInstanceOf(InputChangedError);
    expect((r.error as Error).message).toMatch(/tickets\.parquet changed while it was read/);
  });
});
