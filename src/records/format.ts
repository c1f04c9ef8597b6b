/**
 * What a data format is: how its records are read and how rows are written
 * in it, with what the surfaces that pick a format by name need to know
 * (extensions, content type, gzip, layout). One module per format implements
 * `Format` (jsonl.ts, csv.ts, parquet.ts, ...); the registry
 * (formats.ts) lists them, and every reader and writer of a data file asks
 * it, so adding a format is one module and one entry there.
 */
import type { Readable } from "node:stream";
import type { SourceItem } from "./source.js";
import type { TemporalKind } from "./time-text.js";

/**
 * A column's type: text, a float, a whole number, a boolean, JSON text
 * (values that are objects or of mixed types), or a date or timestamp held
 * as the ISO 8601 text time-text.ts writes (a timestamp's kind names its
 * unit and whether it is in UTC). Text formats write every kind as text; a
 * typed one (Parquet) gives each its own type.
 */
export type ColumnKind = "string" | "double" | "int" | "bool" | "json" | TemporalKind;

/** One column of a flat table: its name, its kind, and its value in a row (undefined or null: an empty cell). */
export interface Column<R> {
  name: string;
  kind: ColumnKind;
  value(row: R): unknown;
  /** Its cells are copied from the input (kept fields): text formats keep spreadsheets from running them as formulas. */
  fromInput?: boolean;
}

/** Rows of `R` as a writer sees them: flat columns (CSV, Parquet) or one nested record per row (JSONL). */
export interface Table<R> {
  columns: readonly Column<R>[];
  record(row: R): Record<string, unknown>;
}

/**
 * Rows in, bytes out: what a row adds to the file (maybe nothing yet:
 * Parquet buffers a row group) and what ends it (a header when no row came,
 * buffered rows, a footer). Encoders never touch a stream.
 */
export interface RowEncoder<R> {
  row(r: R): string | Uint8Array;
  end(): string | Uint8Array;
}

/**
 * A setting of how a format reads inputs or writes outputs, given on the
 * command line (`--csv-delimiter`, `--csv-bom`): declared once, by the
 * format that takes it. Commands add the flags the registry lists
 * (`formatOptions` in formats.ts) and hand their values on untouched as
 * `FormatSettings`, so a new option is a change to its format's module only.
 */
export interface FormatOption {
  /** The flag without its dashes: `csv-delimiter`. */
  flag: string;
  /** Whether it shapes how inputs are read or how outputs are written. */
  applies: "read" | "write";
  type: "string" | "boolean";
  /** Its value when the flag is not given (`settingOf`); shown in the help. */
  default: string | boolean;
  describe: string;
  /** A string option's value as the format takes it (`tab` is a tab), or what the flag takes, for a usage error. */
  parse?(text: string): { value: string } | { error: string };
}

/** The values of the format options given, by flag (a flag not given is absent: its format takes the option's default). */
export type FormatSettings = Readonly<Record<string, string | boolean | undefined>>;

/** An option's value in `settings`, else its default. */
export function settingOf<T extends string | boolean>(option: FormatOption & { default: T }, settings: FormatSettings): T {
  return (settings[option.flag] as T | undefined) ?? option.default;
}

/** What a stream reader is handed besides the bytes: the format options given, and where a warning goes (the run's log). */
export interface ReadContext {
  settings: FormatSettings;
  warn(message: string): void;
  /** Whether the command takes the format options as flags, so a message may tell the user to pass one. */
  takesOptions: boolean;
}

/** No options given or taken, warnings dropped: what readers get from callers that have neither. */
export const QUIET_DEFAULTS: ReadContext = { settings: {}, warn: () => undefined, takesOptions: false };

/** A file or object read by byte ranges; `close` releases what it holds. */
export interface RangedFile {
  byteLength: number;
  slice(start: number, end?: number): Promise<ArrayBuffer>;
  close(): Promise<void>;
  /** Throws `InputChangedError` when the file is no longer the one read (called after its last range). */
  verify?(): Promise<void>;
}

/** Records of one byte stream (already gunzipped), numbered from `firstSeq`; a record that cannot be read is an error item. */
export type StreamReader = (stream: Readable, source: string, firstSeq: number, context: ReadContext) => AsyncGenerator<SourceItem>;

/** Records of a file read by ranges; `counter` moves with the bytes read, `fields` are the dotted paths the job reads (undefined: all). */
export type RangedReader = (
  open: () => Promise<RangedFile>,
  source: string,
  firstSeq: number,
  counter: { bytes: number },
  fields: readonly string[] | undefined,
) => AsyncGenerator<SourceItem>;

/** A data format: one entry of the registry (formats.ts). */
export interface Format {
  /** What `--format` and `--output-format` take. */
  name: string;
  /** As people name it in a sentence: "CSV". */
  title: string;
  /** File name endings, lower case with the dot, the one written first (review files take it). */
  extensions: readonly string[];
  contentType: string;
  /** Its rows: nested records holding the answers as the API returns them, or flat columns named `<question>.<column>`. */
  layout: "records" | "columns";
  /** Columns keep their kinds (Parquet): a writer needs each kept field's kind before the first row. */
  typed: boolean;
  /** A `.gz` name is allowed: written gzipped, read gunzipped. */
  gzip: boolean;
  /** How the file starts, when that tells it apart (a stream of it is refused, named). */
  signature?: Uint8Array | undefined;
  /** From a byte stream (stdin, gzip, S3 bodies), or by ranges of a file (it cannot come from stdin). */
  read: { stream: StreamReader } | { ranged: RangedReader };
  write<R>(table: Table<R>, settings: FormatSettings): RowEncoder<R>;
  /** The command-line options it takes (`--csv-delimiter`), if any. */
  options?: readonly FormatOption[];
}

/** A text format's encoder: a header (maybe empty) before the first row (or alone, for no rows), then one piece of text per row. */
export function textEncoder<R>(header: string, line: (r: R) => string): RowEncoder<R> {
  let started = false;
  const head = () => {
    if (started) return "";
    started = true;
    return header;
  };
  return { row: (r) => head() + line(r), end: head };
}
