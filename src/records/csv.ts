/**
 * CSV, and any delimited text format made the same way: read with
 * csv-parse, each record's starting line found, a broken record an error
 * row; written with RFC 4180 quoting, as csv-stringify's defaults would
 * (a cell is quoted when it holds a quote, the delimiter or a line break),
 * by hand: csv-stringify per row took 4x the time of JSON.stringify on a
 * million-row gold file.
 *
 * Read as spreadsheets and other tools write it, never silently wrong: a
 * header that reads as one column holding `;` or a tab is refused with the
 * flag that reads it (Excel writes CSV with `;` in many locales); a record
 * with more cells than the header is an error row (its cells would land
 * under the wrong names); CR CR LF line ends are one line end; a quoted
 * cell running over lines that read as records of their own is warned
 * about (a quote left open takes the records after it, and RFC 4180 cannot
 * tell that from a cell holding line breaks). Written so spreadsheets do not
 * run input text as formulas (OWASP's CSV injection advice).
 */
import type { Readable } from "node:stream";
import { parse as parseCsv } from "csv-parse";
import { InputChangedError, SourceError } from "../api/verdict.js";
import {
  type Format,
  type FormatOption,
  type FormatSettings,
  type ReadContext,
  type RowEncoder,
  type StreamReader,
  settingOf,
  type Table,
  textEncoder,
} from "./format.js";
import type { SourceItem } from "./source.js";
import { MAX_RECORD_BYTES, singleLineEnds, utf8Checked } from "./text.js";

/** `--csv-delimiter`: what separates the cells of CSV inputs. */
export const CSV_DELIMITER: FormatOption & { default: string } = {
  flag: "csv-delimiter",
  applies: "read",
  type: "string",
  default: ",",
  describe: 'the character between the cells of CSV inputs: "," (the default), ";" (Excel\'s CSV in many locales), "|", or "tab"',
  parse: (text) => {
    const value = text === "tab" || text === "\\t" ? "\t" : text;
    return [...value].length === 1 && !/["\r\n]/.test(value) ? { value } : { error: 'one character (not a quote or a line break), or "tab"' };
  },
};

/** `--csv-bom`: a UTF-8 byte order mark first (Excel reads UTF-8 text without one as a legacy code page). */
export const CSV_BOM: FormatOption & { default: boolean } = {
  flag: "csv-bom",
  applies: "write",
  type: "boolean",
  default: false,
  describe: "start CSV and tab-separated outputs with a UTF-8 byte order mark (for Excel)",
};

/** `--csv-escape-formulas`: input text that a spreadsheet would run as a formula is written with a leading `'`. */
export const CSV_ESCAPE_FORMULAS: FormatOption & { default: boolean } = {
  flag: "csv-escape-formulas",
  applies: "write",
  type: "boolean",
  default: true,
  describe:
    "write kept cells that start with =, +, - or @ (numbers aside) with a leading ' so spreadsheets show them instead of running them; --no-csv-escape-formulas writes them as they are",
};

/** The delimiters a one-column header is searched for, and how messages name them. */
const DELIMITERS: ReadonlyMap<string, { one: string; many: string }> = new Map([
  [",", { one: "comma", many: "commas" }],
  [";", { one: "semicolon", many: "semicolons" }],
  ["\t", { one: "tab", many: "tabs" }],
  ["|", { one: "pipe", many: "pipes" }],
]);
const named = (delimiter: string, count: "one" | "many") => DELIMITERS.get(delimiter)?.[count] ?? JSON.stringify(delimiter);

/** How one delimited format reads: its name in messages, its delimiter from the options given, and the flags that read a file separated otherwise. */
export interface DelimitedReading {
  title: string;
  /** The delimiter, and whether the options given chose it (a one-column header is then what the user said). */
  delimiter(settings: FormatSettings): { delimiter: string; chosen: boolean };
  /** The flags that read a file whose cells `found` separates (`--csv-delimiter ";"`). */
  flagsFor(found: string): string;
}

/** A reader of delimited text: RFC 4180 quoting, a header row naming the columns; every value is text. */
export function delimitedReader(reading: DelimitedReading): StreamReader {
  return (stream, source, firstSeq, context) => delimitedItems(stream, source, firstSeq, reading, context);
}

/** A cell's text for a message: at most 60 characters. */
function shown(text: string): string {
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 57)}...` : text);
}

/**
 * The header's names; a header that reads as one column holding another
 * delimiter is refused (exit 2) with the flags that read it, unless the
 * options chose the delimiter: read as one column, every record would fail
 * for a field it seems to lack.
 */
function headerOf(cells: string[], source: string, reading: DelimitedReading, context: ReadContext): string[] {
  const { delimiter, chosen } = reading.delimiter(context.settings);
  const only = cells.length === 1 ? (cells[0] as string) : undefined;
  const found = only === undefined || chosen ? undefined : [...DELIMITERS.keys()].find((d) => d !== delimiter && only.includes(d));
  if (only === undefined || found === undefined) return cells;
  const how = context.takesOptions
    ? `pass ${reading.flagsFor(found)}`
    : `save it with ${named(delimiter, "many")} between cells (typed-eval run takes ${reading.flagsFor(found)})`;
  throw new SourceError(
    `${source}: its header reads as one column, ${shown(only)}, holding ${named(found, "many")}: a ${reading.title} separated by ${named(found, "many")} (as Excel writes CSV in many locales)? ${how}`,
  );
}

/** A record from its cells under the header's names; more cells than names is an error (an empty cell beyond them, as a trailing delimiter leaves, is nothing lost). */
function recordOf(cells: string[], header: readonly string[]): { record: Record<string, string> } | { extra: string[] } {
  if (cells.length > header.length) {
    const extra = cells.slice(header.length);
    if (extra.some((c) => c !== "")) return { extra };
  }
  const n = Math.min(cells.length, header.length);
  const record: Record<string, string> = {};
  for (let i = 0; i < n; i++) {
    const name = header[i] as string;
    // Defined, not assigned: a column named __proto__ is a field like any other.
    if (name === "__proto__") Object.defineProperty(record, name, { value: cells[i], enumerable: true, writable: true, configurable: true });
    else record[name] = cells[i] as string;
  }
  return { record };
}

/** Records named one by one in warnings of quotes that may be open; the rest are counted in one line at the end. */
const NAMED_SPANS = 3;

/**
 * Watches records whose quoted cell runs over lines that, read alone, have
 * as many cells as the header: what a quote left open makes of the records
 * after it. Read on (the file may mean it), warned about, never silent.
 */
class OpenQuoteWatch {
  private count = 0;
  constructor(
    private readonly source: string,
    private readonly delimiter: string,
    private readonly warn: (message: string) => void,
  ) {}

  /** A record spanning lines (`raw` as csv-parse read it), starting on line `start`. */
  see(raw: string, start: number, columns: number): void {
    if (columns < 2) return;
    const body = raw.replace(/^[\r\n]+/, "").replace(/(\r\n|\n|\r)$/, "");
    const lines = body.split(/\r\n|\n|\r/);
    const at = lines.findIndex((line, i) => i > 0 && line.split(this.delimiter).length === columns);
    if (at < 0 || ++this.count > NAMED_SPANS) return;
    const line = start + at;
    this.warn(
      `${this.source}: the record at line ${start} has a quoted cell running to line ${start + lines.length - 1}, and line ${line} reads as a record of its own: a quote left open? It was read as one record (a quoted cell may hold line breaks); if line ${line} is a record, close the quote on line ${start}`,
    );
  }

  end(): void {
    if (this.count > NAMED_SPANS) {
      this.warn(
        `${this.source}: ${this.count} records in all have a quoted cell running over lines that read as records of their own (the first ${NAMED_SPANS} named above)`,
      );
    }
  }
}

/** A record csv-parse skipped (too long, a quote never closed): the lines it spans and why. */
interface Skipped {
  from: number;
  to: number;
  message: string;
}

/** A parsed record as csv-parse hands it over with `info` and `raw`. */
interface ParsedRow {
  record: string[];
  info: { lines: number };
  raw: string;
}

/**
 * The bytes through the UTF-8 check and the line-end fix into csv-parse,
 * cells as arrays (a record's cells beyond the header's names are judged by
 * the reader, not dropped), and the records it skips, in input order: the
 * parser fires `skip` before it pushes any later record.
 */
function parsedRows(
  stream: Readable,
  source: string,
  delimiter: string,
  warn: (message: string) => void,
): { rows: AsyncIterable<ParsedRow>; skipped: Skipped[] } {
  let lastLine = 1; // where the previous record (or the header) ended
  const checked = stream.pipe(utf8Checked(source));
  stream.once("error", (e) => checked.destroy(e));
  const lineEnds = checked.pipe(
    singleLineEnds(() => warn(`${source}: its lines end in CR CR LF (Windows line ends added twice over); each is read as one line end`)),
  );
  checked.once("error", (e) => lineEnds.destroy(e));
  const parser = lineEnds.pipe(
    parseCsv({
      delimiter,
      bom: true,
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
      on_record: (record: string[], context: { lines: number }) => {
        lastLine = context.lines;
        return record;
      },
    }),
  );
  lineEnds.once("error", (e) => parser.destroy(e));
  const skipped: Skipped[] = [];
  parser.on("skip", (e: Error & { lines?: number }) => {
    const to = e.lines ?? lastLine + 1;
    skipped.push({ from: Math.min(lastLine + 1, to), to, message: e.message });
    lastLine = to;
  });
  return { rows: parser as AsyncIterable<ParsedRow>, skipped };
}

/** A skipped record's error row text. */
function skippedError(bad: Skipped, title: string): string {
  const span = bad.to > bad.from ? ` (it runs to line ${bad.to}${/not closed/i.test(bad.message) ? ", the end of the input" : ""})` : "";
  return `${title} error in the record at line ${bad.from}${span}: ${bad.message}`;
}

async function* delimitedItems(
  stream: Readable,
  source: string,
  firstSeq: number,
  reading: DelimitedReading,
  context: ReadContext,
): AsyncGenerator<SourceItem> {
  const { title } = reading;
  const { delimiter } = reading.delimiter(context.settings);
  const { rows, skipped } = parsedRows(stream, source, delimiter, context.warn);
  let seq = firstSeq;
  const drainSkipped = function* (before: number): Generator<SourceItem> {
    while (skipped.length > 0 && (skipped[0] as Skipped).from < before) {
      const bad = skipped.shift() as Skipped;
      yield { seq: seq++, line: bad.from, source, error: skippedError(bad, title) };
    }
  };
  const quotes = new OpenQuoteWatch(source, delimiter, context.warn);
  let header: string[] | undefined;
  let drift = 0;
  try {
    for await (const row of rows) {
      const { start, crlf, breaks } = startLine(row.raw, row.info.lines - drift);
      drift += crlf;
      yield* drainSkipped(row.info.lines);
      if (!header) {
        header = headerOf(row.record, source, reading, context);
        continue;
      }
      const read = recordOf(row.record, header);
      if ("record" in read) yield { seq: seq++, line: start, source, record: read.record };
      else {
        const error = `${title} error in the record at line ${start}: ${row.record.length} cells where the header names ${header.length} (beyond them: ${shown(read.extra.join(delimiter))}); a ${named(delimiter, "one")} inside a cell that is not quoted? quote that cell`;
        yield { seq: seq++, line: start, source, error };
      }
      if (breaks > 0) quotes.see(row.raw, start, header.length);
    }
    yield* drainSkipped(Number.POSITIVE_INFINITY);
    quotes.end();
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
export function startLine(raw: string, end: number): { start: number; crlf: number; breaks: number } {
  const body = raw.replace(/^[\r\n]+/, "").replace(/(\r\n|\n|\r)$/, "");
  const crlf = body.split("\r\n").length - 1;
  const breaks = (body.match(/\r\n|\n|\r/g) ?? []).length;
  return { start: end - crlf - breaks, crlf, breaks };
}

/** What a spreadsheet runs as a formula: text starting with =, +, - or @ (OWASP adds tab and carriage return)... */
const FORMULA_START = /^[=+\-@\t\r]/;
/** ...unless the whole cell is a number (-3, +1.5e3, -1,5), which it reads as the number. */
const NUMBER = /^[+-]?(?:\d[\d.,]*|[.,]\d+)(?:[eE][+-]?\d+)?$/;

/** Text a spreadsheet would run as a formula, with a leading `'` (it then shows the text, `'` included when imported); any other text as it is. */
export function formulaEscaped(text: string): string {
  return FORMULA_START.test(text) && !NUMBER.test(text) ? `'${text}` : text;
}

/**
 * A writer of delimited text: a header of the column names, then one line
 * per row (objects and lists as JSON, booleans as true/false, NaN as `NaN`).
 * Cells copied from the input are formula-escaped unless the settings say
 * not to (`--no-csv-escape-formulas`); numbers are never (-3 stays -3).
 */
export function delimitedWriter(delimiter: string): <R>(table: Table<R>, settings: FormatSettings) => RowEncoder<R> {
  // The delimiters used here (comma, tab) mean themselves inside a character class.
  const needsQuotes = new RegExp(`["\\r\\n${delimiter}]`);
  const quoted = (text: string) => (needsQuotes.test(text) ? `"${text.replaceAll('"', '""')}"` : text);
  // Numbers first: most cells are, and their text never needs quotes.
  const cellOf =
    (text: (s: string) => string) =>
    (value: unknown): string =>
      typeof value === "number"
        ? String(value)
        : typeof value === "string"
          ? quoted(text(value))
          : value === null || value === undefined
            ? ""
            : typeof value === "object"
              ? quoted(JSON.stringify(value))
              : quoted(String(value));
  const plain = cellOf((s) => s);
  const escaped = cellOf(formulaEscaped);
  return (table, settings) => {
    const { columns } = table;
    const guard = settingOf(CSV_ESCAPE_FORMULAS, settings);
    const cells = columns.map((c) => (guard && c.fromInput ? escaped : plain));
    const header = `${settingOf(CSV_BOM, settings) ? "\ufeff" : ""}${columns.map((c) => quoted(c.name)).join(delimiter)}\n`;
    return textEncoder(header, (r) => {
      let line = "";
      for (let i = 0; i < columns.length; i++)
        line += (i === 0 ? "" : delimiter) + (cells[i] as typeof plain)((columns[i] as (typeof columns)[number]).value(r));
      return `${line}\n`;
    });
  };
}

/** CSV (also `.csv.gz`), comma-separated unless `--csv-delimiter` says otherwise (when reading). */
export const CSV: Format = {
  name: "csv",
  title: "CSV",
  extensions: [".csv"],
  contentType: "text/csv",
  layout: "columns",
  typed: false,
  gzip: true,
  read: {
    stream: delimitedReader({
      title: "CSV",
      delimiter: (settings) => ({ delimiter: settingOf(CSV_DELIMITER, settings), chosen: settings[CSV_DELIMITER.flag] !== undefined }),
      flagsFor: (found) => `--csv-delimiter ${found === "\t" ? "tab" : JSON.stringify(found)}`,
    }),
  },
  write: delimitedWriter(","),
  options: [CSV_DELIMITER, CSV_BOM, CSV_ESCAPE_FORMULAS],
};
