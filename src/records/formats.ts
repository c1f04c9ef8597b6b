/**
 * The registry of data formats: the one list every reader and writer of a
 * data file asks (run's input and outputs, the quality tools' answers and
 * gold, suspects, Label Studio's review files and gold). A format is a module
 * implementing `Format` (format.ts) and one entry in `FORMATS`; nothing else
 * names one.
 */
import { gzipSync } from "node:zlib";
import { InvocationError } from "../api/errors.js";
import { SourceError } from "../api/verdict.js";
import { CSV } from "./csv.js";
import type { Format, FormatOption, FormatSettings, RowEncoder, Table } from "./format.js";
import { JSONL } from "./jsonl.js";
import { PARQUET } from "./parquet.js";
import { TSV } from "./tsv.js";

/** Every format, in the order help and messages list them; the first is what a name without a known extension (stdin, `.json`) is read as. */
export const FORMATS: readonly Format[] = [JSONL, CSV, TSV, PARQUET];

/** A file's format as its name (or a flag) gives it, and whether it is gzipped. */
export interface FileFormat {
  format: Format;
  gzip: boolean;
}

/** The names `--format` and `--output-format` take. */
export function formatNames(): string[] {
  return FORMATS.map((f) => f.name);
}

/** The options the formats take, for the commands that read (`applies: "read"`) or write data files: each flag once, in registry order. */
export function formatOptions(applies: FormatOption["applies"]): FormatOption[] {
  const seen = new Map<string, FormatOption>();
  for (const option of FORMATS.flatMap((f) => f.options ?? [])) if (option.applies === applies && !seen.has(option.flag)) seen.set(option.flag, option);
  return [...seen.values()];
}

/** A format by its name; undefined when none has it. */
export function formatNamed(name: string): Format | undefined {
  return FORMATS.find((f) => f.name === name);
}

/** The format by name, or a usage error (exit 2) listing the names. */
function named(name: string, flag: string): Format {
  const format = formatNamed(name);
  if (!format) throw new InvocationError(`${flag} ${name}: no such format; the formats are ${formatNames().join(", ")}`);
  return format;
}

/** The format a location's name ends in (`.csv`, `.csv.gz`, `.parquet`, ...); undefined when no registered extension ends it. */
export function formatOfName(location: string): FileFormat | undefined {
  const lower = location.toLowerCase();
  const gzip = lower.endsWith(".gz");
  const base = gzip ? lower.slice(0, -3) : lower;
  const format = FORMATS.find((f) => f.extensions.some((e) => base.endsWith(e)));
  return format ? { format, gzip } : undefined;
}

/** The registered extensions as one line: ".jsonl, .ndjson (JSONL); .csv (CSV); ...; JSONL, CSV, ... also gzipped (.gz)". */
export function formatList(): string {
  const zipped = FORMATS.filter((f) => f.gzip).map((f) => f.title);
  return `${FORMATS.map((f) => `${f.extensions.join(", ")} (${f.title})`).join("; ")}; ${zipped.join(", ")} also gzipped (.gz)`;
}

/** Refuses a gzipped name for a format that is not gzipped (Parquet compresses inside, and is read by ranges). */
function gzipAllowed(file: FileFormat, location: string, error: (message: string) => Error): FileFormat {
  if (file.gzip && !file.format.gzip) {
    const plain = location.slice(0, -3);
    throw error(`${location}: ${file.format.title} is not gzipped (it compresses inside); name it ${plain}`);
  }
  return file;
}

/**
 * The format records are read in: the one named by `explicit` (`--format`),
 * else the one the location's extension names, else JSONL (stdin, `.json`,
 * a name without an extension). Gzip is found by its bytes, whatever the name.
 */
export function inputFormat(location: string, explicit?: string): Format {
  if (explicit !== undefined) return named(explicit, "--format");
  const file = formatOfName(location);
  if (!file) return JSONL;
  return gzipAllowed(file, location, (message) => new SourceError(message)).format;
}

/**
 * The format a data file is written in, known before anything is paid: the
 * one `explicit` names (`flag`, such as `--output-format`), else JSONL for
 * stdout ("-"), else the one its extension names. An extension no format
 * registered is refused (exit 2) with the list of those that are: writing
 * JSONL under another name would look like success. So is a flag naming
 * another format than the extension does (`--output-format parquet -o
 * a.jsonl`): every reader, ours included, would take the file for what its
 * name says. A name without a registered extension takes the flag's format.
 */
export function outputFormat(location: string, options: { explicit?: string | undefined; flag?: string; what?: string } = {}): FileFormat {
  const { explicit, flag, what } = options;
  const usage = (message: string) => new InvocationError(`cannot write ${what ? `${what} ` : ""}${message}`);
  const file = formatOfName(location);
  if (explicit !== undefined) {
    const format = named(explicit, flag ?? "--output-format");
    if (file && file.format !== format) {
      const base = location.replace(/\.gz$/i, "");
      const ext = file.format.extensions.find((e) => base.toLowerCase().endsWith(e)) ?? "";
      const zipped = base !== location && format.gzip ? ".gz" : "";
      const renamed = `${base.slice(0, base.length - ext.length)}${format.extensions[0] as string}${zipped}`;
      throw usage(
        `${location}: ${flag ?? "--output-format"} ${format.name} writes ${format.title}, but the name says ${file.format.title}; name it ${renamed}, or leave out ${flag ?? "--output-format"}`,
      );
    }
    return gzipAllowed({ format, gzip: location.toLowerCase().endsWith(".gz") }, location, usage);
  }
  if (location === "-") return { format: JSONL, gzip: false };
  if (!file) throw usage(`${location}: no format has its extension; name it ${formatList()}${flag ? `, or pass ${flag}` : ""}`);
  return gzipAllowed(file, location, usage);
}

/** The file name ending a format writes: `.csv`, `.csv.gz`. */
export function extensionOf(file: FileFormat): string {
  return `${file.format.extensions[0] as string}${file.gzip ? ".gz" : ""}`;
}

/** Bytes gathered before a gzip member is made: about as small as one stream, and memory stays flat. */
const GZIP_MEMBER_BYTES = 1 << 20;

/**
 * An encoder's output gzipped as a series of gzip members (RFC 1952 allows
 * any number; gunzip, Python, pandas and DuckDB read them as one stream),
 * each made of about a MiB of output, so encoders stay synchronous.
 */
function gzipped<R>(inner: RowEncoder<R>): RowEncoder<R> {
  let pending: Buffer[] = [];
  let held = 0;
  const take = (chunk: string | Uint8Array, last: boolean): Uint8Array => {
    if (chunk.length > 0) {
      const bytes = typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      pending.push(Buffer.from(bytes));
      held += bytes.length;
    }
    if (!last && held < GZIP_MEMBER_BYTES) return new Uint8Array(0);
    const member = gzipSync(Buffer.concat(pending, held));
    pending = [];
    held = 0;
    return member;
  };
  return { row: (r) => take(inner.row(r), false), end: () => take(inner.end(), true) };
}

/** The encoder of rows for a file: its format's (with the format options given), gzipped when its name ends in `.gz`. */
export function encoderOf<R>(file: FileFormat, table: Table<R>, settings: FormatSettings = {}): RowEncoder<R> {
  const encoder = file.format.write(table, settings);
  return file.gzip ? gzipped(encoder) : encoder;
}

/** A whole table's bytes at once, for the small files written in one go (gold labels). */
export function encodeAll<R>(file: FileFormat, table: Table<R>, rows: Iterable<R>, settings: FormatSettings = {}): Buffer {
  const encoder = encoderOf(file, table, settings);
  const chunks: Buffer[] = [];
  const add = (chunk: string | Uint8Array) => {
    if (chunk.length > 0) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk));
  };
  for (const row of rows) add(encoder.row(row));
  add(encoder.end());
  return Buffer.concat(chunks);
}

/** Each format's main extension, for help texts: ".jsonl, .csv, .tsv or .parquet". */
export function extensionsText(): string {
  const main = FORMATS.map((f) => f.extensions[0] as string);
  return main.length > 1 ? `${main.slice(0, -1).join(", ")} or ${main.at(-1) as string}` : (main[0] ?? "");
}
