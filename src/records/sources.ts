/**
 * Record sources: JSONL or CSV, optionally gzip, from a path or stdin, and
 * Parquet from a path (parquet.ts); S3 in s3.ts. Streamed: a record is read
 * only when the runner pulls it, so memory stays flat whatever the input size. A record that cannot be parsed
 * becomes an error item with its line number; the stream goes on.
 */
import { isUtf8 } from "node:buffer";
import { createReadStream, fstatSync, statSync } from "node:fs";
import { PassThrough, Transform, type Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { parse as parseCsv } from "csv-parse";
import { depthExceededAt, MAX_JSON_DEPTH } from "../api/json.js";
import { localRanges, looksLikeParquet, parquetItems } from "./parquet.js";
import type { Source, SourceItem } from "./source.js";
import { InputChangedError, SourceError } from "../api/verdict.js";
import { assertSameFile, checkedAtEnd, type FileIdentity, identityOf } from "./file-identity.js";

/** Longest input line or CSV record read; longer ones become error rows without being held in memory. */
export const MAX_RECORD_BYTES = 64 * 1024 * 1024;

/** Why Parquet cannot come from stdin, and what to do instead. */
const PARQUET_NOT_ON_STDIN =
  "Parquet is read from a path or an s3:// location, not stdin (a reader seeks to its footer); save it as a .parquet file and pass its path";

/** Formats records are read in (outputs have their own list in runner/output/outputs.ts). */
export type InputFormat = "jsonl" | "csv" | "parquet";

/** What a source may skip: the dotted paths of the fields the job reads (undefined: whole records). Parquet fetches only those columns. */
export interface SourceOptions {
  fields?: readonly string[] | undefined;
}

/** The format a location implies: `.csv` (or `.csv.gz`) is CSV, `.parquet` (`.pq`, `.parq`) Parquet, anything else JSONL. */
export function formatNamed(location: string): "jsonl" | "csv" | "parquet" {
  if (/\.(parquet|parq|pq)$/i.test(location)) return "parquet";
  return /\.csv(\.gz)?$/i.test(location) ? "csv" : "jsonl";
}

/** An input's format: the one given, else the one its name implies. */
export function formatOf(location: string, explicit?: InputFormat): InputFormat {
  return explicit ?? formatNamed(location);
}

/** Gunzips a stream when it starts with the gzip magic bytes; passes it through otherwise. */
export function maybeGunzip(input: Readable, name: string): Readable {
  const out = new PassThrough();
  // Errors reach the reader through `destroy`; this listener keeps `pipe` from rethrowing them as uncaught.
  out.on("error", () => undefined);
  input.once("error", (e) => out.destroy(e));
  // A stream that ends with no data may end without ever being readable: end the output then too.
  const ended = () => out.end();
  input.once("end", ended);
  input.once("readable", () => {
    input.off("end", ended);
    const first = input.read() as Buffer | null;
    if (first === null) {
      out.end();
      return;
    }
    if (looksLikeParquet(first)) {
      out.destroy(
        new SourceError(
          name === "stdin" ? `stdin is a Parquet file: ${PARQUET_NOT_ON_STDIN}` : `${name} is a Parquet file: name it .parquet or pass --format parquet`,
        ),
      );
      return;
    }
    if (first.length >= 2 && first[0] === 0x1f && first[1] === 0x8b) {
      const gunzip = createGunzip();
      gunzip.once("error", (e) => out.destroy(new SourceError(`${name}: not valid gzip: ${e.message}`)));
      gunzip.pipe(out);
      gunzip.write(first);
      input.pipe(gunzip);
    } else {
      out.write(first);
      input.pipe(out);
    }
  });
  return out;
}

/** Counts bytes flowing through, for progress. */
function counted(input: Readable, counter: { bytes: number }): Readable {
  input.on("data", (chunk: Buffer) => (counter.bytes += chunk.length));
  return input;
}

/** A byte count for people: 512 B, 8.0 MiB, 1.2 GiB. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** A line's bytes, or how long a line was that exceeded `max` (its bytes were dropped as they came). */
type RawLine = { bytes: Buffer } | { tooLong: number };

/** Splits a byte stream at newlines without decoding it, so each line's UTF-8 can be checked on its own. */
export async function* byteLines(stream: AsyncIterable<Buffer>, max = MAX_RECORD_BYTES): AsyncGenerator<RawLine> {
  let parts: Buffer[] = [];
  let held = 0;
  let dropped = 0; // bytes of the current line thrown away once it passed `max`
  const take = (piece: Buffer) => {
    if (dropped > 0 || held + piece.length > max) {
      dropped += held + piece.length;
      parts = [];
      held = 0;
    } else if (piece.length > 0) {
      parts.push(piece);
      held += piece.length;
    }
  };
  const end = (): RawLine => {
    const line: RawLine = dropped > 0 ? { tooLong: dropped } : { bytes: parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, held) };
    parts = [];
    held = 0;
    dropped = 0;
    return line;
  };
  for await (const chunk of stream) {
    let from = 0;
    for (let nl = chunk.indexOf(10, from); nl !== -1; nl = chunk.indexOf(10, from)) {
      take(chunk.subarray(from, nl));
      yield end();
      from = nl + 1;
    }
    // Copied: a subarray would keep the whole chunk alive while the line waits for its end.
    if (from < chunk.length) take(Buffer.from(chunk.subarray(from)));
  }
  if (held > 0 || dropped > 0) yield end();
}

/** The record of one JSONL line, nothing for a blank line, or why it is not a record. */
function parseJsonLine(bytes: Buffer, first: boolean): { record: unknown } | { error: string } | undefined {
  if (!isUtf8(bytes)) return { error: `invalid UTF-8 at byte ${firstInvalidUtf8(bytes)} of the line` };
  let text = bytes.toString("utf8");
  if (first) text = text.replace(/^\uFEFF/, "");
  text = text.trim();
  if (text === "") return undefined;
  const deep = depthExceededAt(text, MAX_JSON_DEPTH);
  if (deep >= 0) return { error: `nested deeper than ${MAX_JSON_DEPTH} levels (at character ${deep})` };
  try {
    return { record: JSON.parse(text) as unknown };
  } catch (error) {
    return { error: `invalid JSON: ${(error as Error).message}` };
  }
}

/** Offset of the first byte that does not start a well-formed UTF-8 character. */
export function firstInvalidUtf8(bytes: Buffer): number {
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i] as number;
    const size = lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3 : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
    // isUtf8 on the one character rejects bad continuations, overlong forms and surrogates.
    if (size === 0 || !isUtf8(bytes.subarray(i, i + size)) || i + size > bytes.length) return i;
    i += size;
  }
  return bytes.length;
}

async function* jsonlItems(stream: Readable, source: string, firstSeq: number): AsyncGenerator<SourceItem> {
  let line = 0;
  let seq = firstSeq;
  for await (const raw of byteLines(stream)) {
    line++;
    if ("tooLong" in raw) {
      yield { seq: seq++, line, source, error: `line is ${formatBytes(raw.tooLong)}, over the ${formatBytes(MAX_RECORD_BYTES)} a record may be` };
      continue;
    }
    const parsed = parseJsonLine(raw.bytes, line === 1);
    if (parsed) yield { seq: seq++, line, source, ...parsed };
  }
}

/** Passes bytes through, failing the stream at the first invalid UTF-8 (CSV records span lines, so there is no row to blame). */
function utf8Checked(source: string): Transform {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let offset = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      try {
        decoder.decode(chunk, { stream: true });
      } catch {
        // A character cut by the chunk boundary is checked with the next chunk: the break is at most 3 bytes earlier.
        return callback(new SourceError(`${source}: invalid UTF-8 near byte ${offset + firstInvalidUtf8(chunk)}`));
      }
      offset += chunk.length;
      callback(null, chunk);
    },
    flush(callback) {
      try {
        decoder.decode();
        callback();
      } catch {
        callback(new SourceError(`${source}: invalid UTF-8: the input ends inside a character`));
      }
    },
  });
}

async function* csvItems(stream: Readable, source: string, firstSeq: number): AsyncGenerator<SourceItem> {
  let lastLine = 1; // where the previous record (or the header) ended
  const checked = stream.pipe(utf8Checked(source));
  stream.once("error", (e) => checked.destroy(e));
  const parser = checked.pipe(
    parseCsv({
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
      yield { seq: seq++, line: bad.from, source, error: `CSV error in the record at line ${bad.from}${span}: ${bad.message}` };
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
    throw new SourceError(`${source}: CSV error${e.lines ? ` at line ${e.lines}` : ""}: ${e.message}`);
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

/** Records of one byte stream (JSONL or CSV; Parquet is read by ranges, see parquet.ts). */
export function itemsOf(stream: Readable, format: "jsonl" | "csv", source: string, firstSeq = 0): AsyncGenerator<SourceItem> {
  const plain = maybeGunzip(stream, source);
  return format === "csv" ? csvItems(plain, source, firstSeq) : jsonlItems(plain, source, firstSeq);
}

/**
 * A local file's bytes, all of the file that `was` describes: checked when it
 * is opened (the path may name another file by then) and after its last byte,
 * before the reader sees the end (`InputChangedError` if it changed).
 */
function pinnedFile(path: string, was: FileIdentity): Readable {
  const file = createReadStream(path);
  const checked = checkedAtEnd(path, was);
  file.once("open", (fd: number) => {
    try {
      assertSameFile(path, was, identityOf(fstatSync(fd)));
    } catch (error) {
      file.destroy(error as Error);
    }
  });
  file.once("error", (error) => checked.destroy(error));
  return file.pipe(checked);
}

/** Opens a local path, or stdin for "-". S3 locations are opened by `openS3Source`. */
export function openLocalSource(location: string, format: InputFormat, options: SourceOptions = {}): Source {
  const counter = { bytes: 0 };
  if (location === "-") {
    if (format === "parquet") throw new SourceError(PARQUET_NOT_ON_STDIN);
    return { name: "stdin", items: itemsOf(counted(process.stdin, counter), format, "stdin"), progress: () => ({ bytes: counter.bytes, total: undefined }) };
  }
  let identity: FileIdentity;
  try {
    const stat = statSync(location);
    if (!stat.isFile()) throw new SourceError(`${location} is not a file`);
    identity = identityOf(stat);
  } catch (error) {
    if (error instanceof SourceError) throw error;
    throw new SourceError(`cannot read input ${location}: ${(error as Error).message}`, { absent: (error as NodeJS.ErrnoException).code === "ENOENT" });
  }
  const items =
    format === "parquet"
      ? parquetItems(() => localRanges(location, identity), location, 0, counter, options.fields)
      : itemsOf(counted(pinnedFile(location, identity), counter), format, location);
  return { name: location, items, progress: () => ({ bytes: counter.bytes, total: identity.size }) };
}
