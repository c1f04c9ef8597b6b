/**
 * Record sources: JSONL or CSV, optionally gzip, from a path or stdin (and
 * S3, see s3.ts). Streamed: a record is read only when the runner pulls it, so
 * memory stays flat whatever the input size. A record that cannot be parsed
 * becomes an error item with its line number; the stream goes on.
 */
import { createReadStream, statSync } from "node:fs";
import { createInterface } from "node:readline";
import { PassThrough, type Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { parse as parseCsv } from "csv-parse";

export type Format = "jsonl" | "csv";

/** One input record, or why a line could not be read. `seq` numbers records across the whole input. */
export type SourceItem =
  | { seq: number; line: number; source: string; record: unknown }
  | { seq: number; line: number; source: string; error: string };

export interface Source {
  name: string;
  items: AsyncIterable<SourceItem>;
  /** Bytes read so far and the total when known, for progress. */
  progress(): { bytes: number; total: number | undefined };
}

export class SourceError extends Error {
  override name = "SourceError";
}

/** The format a location implies: `.csv` (or `.csv.gz`) is CSV, anything else JSONL. */
export function formatOf(location: string, explicit?: Format): Format {
  if (explicit) return explicit;
  return /\.csv(\.gz)?$/i.test(location) ? "csv" : "jsonl";
}

/** Gunzips a stream when it starts with the gzip magic bytes; passes it through otherwise. */
export function maybeGunzip(input: Readable): Readable {
  const out = new PassThrough();
  input.once("error", (e) => out.destroy(e));
  input.once("readable", () => {
    const first = input.read() as Buffer | null;
    if (first === null) {
      out.end();
      return;
    }
    if (first.length >= 2 && first[0] === 0x1f && first[1] === 0x8b) {
      const gunzip = createGunzip();
      gunzip.once("error", (e) => out.destroy(new SourceError(`not valid gzip: ${e.message}`)));
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

async function* jsonlItems(stream: Readable, source: string, firstSeq: number): AsyncGenerator<SourceItem> {
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  let line = 0;
  let seq = firstSeq;
  for await (const text of lines) {
    line++;
    const trimmed = line === 1 ? text.replace(/^\uFEFF/, "").trim() : text.trim();
    if (trimmed === "") continue;
    try {
      yield { seq: seq++, line, source, record: JSON.parse(trimmed) as unknown };
    } catch (error) {
      yield { seq: seq++, line, source, error: `invalid JSON: ${(error as Error).message}` };
    }
  }
}

async function* csvItems(stream: Readable, source: string, firstSeq: number): AsyncGenerator<SourceItem> {
  const parser = stream.pipe(
    parseCsv({
      bom: true,
      columns: true,
      relax_column_count: true,
      skip_empty_lines: true,
      info: true,
    }),
  );
  let seq = firstSeq;
  try {
    for await (const row of parser as AsyncIterable<{ record: Record<string, string>; info: { lines: number } }>) {
      yield { seq: seq++, line: row.info.lines, source, record: row.record };
    }
  } catch (error) {
    const e = error as Error & { lines?: number };
    // A CSV syntax error (an unclosed quote) leaves the rest unreadable: report where, and stop.
    throw new SourceError(`${source}: CSV error${e.lines ? ` at line ${e.lines}` : ""}: ${e.message}`);
  }
}

/** Records of one byte stream. */
export function itemsOf(stream: Readable, format: Format, source: string, firstSeq = 0): AsyncGenerator<SourceItem> {
  const plain = maybeGunzip(stream);
  return format === "csv" ? csvItems(plain, source, firstSeq) : jsonlItems(plain, source, firstSeq);
}

/** Opens a local path, or stdin for "-". S3 locations are opened by `openS3Source`. */
export function openLocalSource(location: string, format: Format): Source {
  const counter = { bytes: 0 };
  let total: number | undefined;
  let stream: Readable;
  if (location === "-") {
    stream = process.stdin;
  } else {
    try {
      const stat = statSync(location);
      if (!stat.isFile()) throw new SourceError(`${location} is not a file`);
      total = stat.size;
    } catch (error) {
      if (error instanceof SourceError) throw error;
      throw new SourceError(`cannot read input ${location}: ${(error as Error).message}`);
    }
    stream = createReadStream(location);
  }
  const name = location === "-" ? "stdin" : location;
  return {
    name,
    items: itemsOf(counted(stream, counter), format, name),
    progress: () => ({ bytes: counter.bytes, total }),
  };
}
