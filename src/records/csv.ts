/**
 * CSV, and any delimited text format made the same way: read with
 * csv-parse, each record's starting line found, a broken record an error
 * row; written with RFC 4180 quoting, as csv-stringify's defaults would
 * (a cell is quoted when it holds a quote, the delimiter or a line break),
 * by hand: csv-stringify per row took 4x the time of JSON.stringify on a
 * million-row gold file.
 */
import type { Readable } from "node:stream";
import { parse as parseCsv } from "csv-parse";
import { InputChangedError, SourceError } from "../api/verdict.js";
import { type Format, type StreamReader, type Table, type WriteOptions, type RowEncoder, textEncoder } from "./format.js";
import type { SourceItem } from "./source.js";
import { MAX_RECORD_BYTES, utf8Checked } from "./text.js";

/** A reader of delimited text: RFC 4180 quoting, a header row naming the columns; every value is text. */
export function delimitedReader(delimiter: string, title: string): StreamReader {
  return (stream, source, firstSeq) => delimitedItems(stream, source, firstSeq, delimiter, title);
}

async function* delimitedItems(stream: Readable, source: string, firstSeq: number, delimiter: string, title: string): AsyncGenerator<SourceItem> {
  let lastLine = 1; // where the previous record (or the header) ended
  const checked = stream.pipe(utf8Checked(source));
  stream.once("error", (e) => checked.destroy(e));
  const parser = checked.pipe(
    parseCsv({
      delimiter,
      bom: true,
      columns: true,
      relax_column_count: true,
      // A quote inside an unquoted field is a character (as Python's csv and spreadsheets read it).
      relax_quotes: true,
      skip_empty_lines: true,
      info: true,
      // The record's text, to find the line it starts on (csv-parse reports where it ends).
      raw: true,
      max_record_size: MAX_RECORD_BYTES,
      // A broken record becomes an error row; the records around it are still read.
      skip_records_with_error: true,
      // Where the parser is (it runs ahead of the reader): a skipped record starts after the last one parsed.
      on_record: (record: unknown, context: { lines: number }) => {
        lastLine = context.lines;
        return record;
      },
    }),
  );
  checked.once("error", (e) => parser.destroy(e));
  // Skipped records are reported in input order: the parser fires `skip` before it pushes any later record.
  const skipped: { from: number; to: number; message: string }[] = [];
  parser.on("skip", (e: Error & { lines?: number }) => {
    const to = e.lines ?? lastLine + 1;
    skipped.push({ from: Math.min(lastLine + 1, to), to, message: e.message });
    lastLine = to;
  });
  let seq = firstSeq;
  const drainSkipped = function* (before: number): Generator<SourceItem> {
    while (skipped.length > 0 && (skipped[0] as { from: number }).from < before) {
      const bad = skipped.shift() as { from: number; to: number; message: string };
      const span = bad.to > bad.from ? ` (it runs to line ${bad.to}${/not closed/i.test(bad.message) ? ", the end of the input" : ""})` : "";
      yield { seq: seq++, line: bad.from, source, error: `${title} error in the record at line ${bad.from}${span}: ${bad.message}` };
    }
  };
  let drift = 0;
  try {
    for await (const row of parser as AsyncIterable<{ record: Record<string, string>; info: { lines: number }; raw: string }>) {
      const { start, crlf } = startLine(row.raw, row.info.lines - drift);
      yield* drainSkipped(row.info.lines);
      yield { seq: seq++, line: start, source, record: row.record };
      drift += crlf;
    }
    yield* drainSkipped(Number.POSITIVE_INFINITY);
  } catch (error) {
    if (error instanceof SourceError || error instanceof InputChangedError) throw error;
    const e = error as Error & { lines?: number };
    throw new SourceError(`${source}: ${title} error${e.lines ? ` at line ${e.lines}` : ""}: ${e.message}`);
  }
}

/**
 * The line a CSV record starts on, from its raw text and the line csv-parse
 * says it ends on. csv-parse counts a CRLF inside quotes as two lines, so
 * `end` has the earlier records' extra counts removed, and `crlf` is this
 * record's, for the records after it.
 */
export function startLine(raw: string, end: number): { start: number; crlf: number } {
  const body = raw.replace(/^[\r\n]+/, "").replace(/(\r\n|\n|\r)$/, "");
  const crlf = body.split("\r\n").length - 1;
  const breaks = (body.match(/\r\n|\n|\r/g) ?? []).length;
  return { start: end - crlf - breaks, crlf };
}

/** A writer of delimited text: a header of the column names, then one line per row (objects and lists as JSON, booleans as true/false). */
export function delimitedWriter(delimiter: string): <R>(table: Table<R>, options: WriteOptions) => RowEncoder<R> {
  // The delimiters used here (comma, tab) mean themselves inside a character class.
  const needsQuotes = new RegExp(`["\\r\\n${delimiter}]`);
  const quoted = (text: string) => (needsQuotes.test(text) ? `"${text.replaceAll('"', '""')}"` : text);
  // Numbers first: most cells are, and their text never needs quotes.
  const cell = (value: unknown): string =>
    typeof value === "number"
      ? String(value)
      : typeof value === "string"
        ? quoted(value)
        : value === null || value === undefined
          ? ""
          : typeof value === "object"
            ? quoted(JSON.stringify(value))
            : quoted(String(value));
  return (table, options) => {
    const { columns } = table;
    const header = `${options.bom ? "\ufeff" : ""}${columns.map((c) => quoted(c.name)).join(delimiter)}\n`;
    return textEncoder(header, (r) => {
      let line = "";
      for (let i = 0; i < columns.length; i++) line += (i === 0 ? "" : delimiter) + cell((columns[i] as (typeof columns)[number]).value(r));
      return `${line}\n`;
    });
  };
}

/** CSV (also `.csv.gz`), comma-separated. */
export const CSV: Format = {
  name: "csv",
  title: "CSV",
  extensions: [".csv"],
  contentType: "text/csv",
  layout: "columns",
  typed: false,
  gzip: true,
  read: { stream: delimitedReader(",", "CSV") },
  write: delimitedWriter(","),
};
