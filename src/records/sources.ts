/**
 * Record sources: a path or stdin, in any registered format (formats.ts),
 * gzip found by its bytes; S3 in s3-source.ts. Streamed: a record is read
 * only when the runner pulls it, so memory stays flat whatever the input
 * size. A record that cannot be parsed becomes an error item with its line
 * number; the stream goes on.
 */
import { createReadStream, fstatSync, type Stats, statSync } from "node:fs";
import { PassThrough, type Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { SourceError } from "../api/verdict.js";
import { assertSameFile, checkedAtEnd, type FileIdentity, identityOf } from "./file-identity.js";
import { type Format, QUIET_DEFAULTS, type ReadContext } from "./format.js";
import { FORMATS } from "./formats.js";
import { localRanges } from "./ranges.js";
import type { Source, SourceItem } from "./source.js";

/** What a source may skip: the dotted paths of the fields the job reads (undefined: whole records; Parquet fetches only those columns); the format options given and where warnings go. */
export interface SourceOptions {
  fields?: readonly string[] | undefined;
  reading?: ReadContext | undefined;
}

/** Why a format read by ranges cannot come from a stream, and what to do instead. */
function notOnStream(format: Format, name: string): string {
  const ext = format.extensions[0] as string;
  const why = `${format.title} is read from a path or an s3:// location, not stdin (its reader seeks through the file); save it as a ${ext} file and pass its path`;
  return name === "stdin" ? `stdin is a ${format.title} file: ${why}` : `${name} is a ${format.title} file: name it ${ext} or pass --format ${format.name}`;
}

/** The format read by ranges whose signature the bytes start with: read as text, it would be garbage line after line. */
function rangedFormatOf(first: Uint8Array): Format | undefined {
  return FORMATS.find((f) => "ranged" in f.read && f.signature !== undefined && Buffer.from(first.subarray(0, f.signature.length)).equals(f.signature));
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
    const ranged = rangedFormatOf(first);
    if (ranged) {
      out.destroy(new SourceError(notOnStream(ranged, name)));
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

/** Records of one byte stream in a format read from streams, gunzipped when it is gzip. */
export function itemsOf(stream: Readable, format: Format, source: string, firstSeq = 0, reading: ReadContext = QUIET_DEFAULTS): AsyncGenerator<SourceItem> {
  if (!("stream" in format.read)) throw new SourceError(notOnStream(format, source));
  return format.read.stream(maybeGunzip(stream, source), source, firstSeq, reading);
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

/** What a path that is not a file is, and what to do instead: a pipe (`run <(cat t.jsonl)`) is read as stdin, `-`. */
function notAFile(stat: Stats): string {
  if (stat.isDirectory()) return " (it is a directory): name a file in it";
  if (stat.isFIFO() || stat.isSocket() || stat.isCharacterDevice())
    return " but a pipe (a <(...) process substitution, a named pipe), which is read as stdin: pipe it in and pass - (cat data.jsonl | typed-eval run - ...)";
  return "";
}

/** Opens a local path, or stdin for "-", in `format` (`inputFormat` in formats.ts). S3 locations are opened by `openS3Source`. */
export function openLocalSource(location: string, format: Format, options: SourceOptions = {}): Source {
  const counter = { bytes: 0 };
  if (location === "-") {
    if (!("stream" in format.read)) throw new SourceError(notOnStream(format, "stdin"));
    const items = itemsOf(counted(process.stdin, counter), format, "stdin", 0, options.reading);
    return { name: "stdin", items, progress: () => ({ bytes: counter.bytes, total: undefined }) };
  }
  let identity: FileIdentity;
  try {
    const stat = statSync(location);
    if (!stat.isFile()) throw new SourceError(`${location} is not a file${notAFile(stat)}`);
    identity = identityOf(stat);
  } catch (error) {
    if (error instanceof SourceError) throw error;
    throw new SourceError(`cannot read input ${location}: ${(error as Error).message}`, { absent: (error as NodeJS.ErrnoException).code === "ENOENT" });
  }
  const items =
    "ranged" in format.read
      ? format.read.ranged(() => localRanges(location, identity), location, 0, counter, options.fields)
      : itemsOf(counted(pinnedFile(location, identity), counter), format, location, 0, options.reading);
  return { name: location, items, progress: () => ({ bytes: counter.bytes, total: identity.size }) };
}
