/**
 * The delimited writer (comma- and tab-separated) against csv-stringify as the oracle: the
 * hand-written writer exists for speed only (bench/RESULTS.md), so its bytes
 * must be csv-stringify's for every kind of cell, delimiters included.
 */
import { stringify } from "csv-stringify/sync";
import { describe, expect, it } from "vitest";
import { delimitedWriter } from "../../src/records/csv.js";
import type { Column, Table } from "../../src/records/format.js";

/** Cells that need quoting or casting in some way, and some that do not. */
const CELLS: unknown[] = [
  "plain",
  "",
  'a "quoted" word',
  "comma, inside",
  "tab\tinside",
  "line\nbreak",
  "carriage\rreturn",
  "crlf\r\nend",
  '"',
  "Ünïcödé 中文 🚀",
  " leading and trailing ",
  0,
  -0,
  0.1 + 0.2,
  -2.5e-12,
  1e21,
  123456789012,
  true,
  false,
  null,
  undefined,
  { nested: { "a,b": [1, '"x"'] } },
  ["list", 2, null],
];

/** Rows of three cells each, so every cell meets every position (first, middle, last). */
function rows(): unknown[][] {
  return CELLS.flatMap((c, i) => [
    [c, CELLS[(i + 1) % CELLS.length], CELLS[(i + 2) % CELLS.length]],
    [CELLS[(i + 5) % CELLS.length], c, CELLS[(i + 7) % CELLS.length]],
  ]);
}

function written(delimiter: string, data: unknown[][], names: string[]): string {
  const columns: Column<unknown[]>[] = names.map((name, i) => ({ name, kind: "string", value: (r) => r[i] }));
  const table: Table<unknown[]> = { columns, record: () => ({}) };
  const encoder = delimitedWriter(delimiter)(table, {});
  let text = "";
  for (const r of data) text += encoder.row(r) as string;
  const end = encoder.end() as string;
  // The header comes with the first row (or alone at the end when no row came).
  return data.length === 0 ? end : text + end;
}

function oracle(delimiter: string, data: unknown[][], names: string[]): string {
  return stringify(data, {
    delimiter,
    header: true,
    columns: names,
    record_delimiter: "unix",
    // Ours writes booleans as true/false (csv-stringify's default is 1 and empty) and objects as JSON (as csv-stringify does).
    cast: { boolean: (v) => String(v) },
    // Ours also quotes a lone carriage return, which csv-parse (auto-detecting line ends) would read as a record's end.
    quoted_match: /\r/,
  });
}

describe("the delimited writer", () => {
  for (const [name, delimiter] of [
    ["comma-separated", ","],
    ["tab-separated", "\t"],
  ] as const) {
    it(`writes ${name} byte for byte as csv-stringify does, header included`, () => {
      const names = ["id", "a, b", 'say "hi"'];
      const data = rows();
      expect(written(delimiter, data, names)).toBe(oracle(delimiter, data, names));
    });
  }

  it("writes the header alone when no row came", () => {
    expect(written(",", [], ["id", "x"])).toBe(oracle(",", [], ["id", "x"]));
  });
});
