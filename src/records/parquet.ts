/**
 * Parquet in, on hyparquet (pure JavaScript, 1.3 MB installed with the
 * decompressors; why these, in the README).
 *
 * Reading goes one row group at a time through byte ranges of the file (a
 * local file or an S3 object read by ranged GETs), so memory holds one row
 * group whatever the file's size, and only the columns a job names are
 * fetched. Values become what a JSON record would hold: 64-bit integers are
 * numbers (text beyond 2^53), timestamps ISO-8601 text, binary base64.
 */
import { open } from "node:fs/promises";
import type { S3Client } from "@aws-sdk/client-s3";
import { getPinned, type ObjectVersion, storageCall } from "./s3.js";
import { parquetMetadataAsync, parquetReadObjects, parquetSchema, type AsyncBuffer, type FileMetaData, type RowGroup } from "hyparquet";
import { compressors } from "hyparquet-compressors";
import type { SourceItem } from "./source.js";
import { InvocationError } from "../api/errors.js";
import { InputChangedError, SourceError, StorageError } from "../api/verdict.js";
import { assertPathUnchanged, assertSameFile, type FileIdentity, identityOf } from "./file-identity.js";

/** A Parquet file's bytes by range; `close` releases what it holds. */
export interface RangedFile extends AsyncBuffer {
  close(): Promise<void>;
  /** Throws `InputChangedError` when the file is no longer the one read (called after its last row group). */
  verify?(): Promise<void>;
}

/** Errors that are not the bytes' fault and keep their own verdict: the input changed, the store failed, a setting is wrong. */
function ownVerdict(error: unknown): boolean {
  return error instanceof InputChangedError || error instanceof StorageError || error instanceof InvocationError;
}

/** Reading a byte range failed (a disk or network error), as opposed to the bytes not being Parquet. */
class ReadFailure extends Error {}

/** The file with each failed read marked as the read's failure (not the format's). */
function marked(file: RangedFile): AsyncBuffer {
  return {
    byteLength: file.byteLength,
    slice: async (start, end = file.byteLength) => {
      try {
        return await file.slice(start, end);
      } catch (error) {
        if (ownVerdict(error)) throw error;
        throw new ReadFailure(`reading bytes ${start}-${end}: ${(error as Error).message}`);
      }
    },
  };
}

/**
 * A local file read by ranges through one file handle, all of the file
 * `seen` describes (by default, the one opened): checked when it is opened,
 * after every range and at the end (`InputChangedError` when it was replaced
 * or modified meanwhile).
 */
export async function localRanges(path: string, seen?: FileIdentity): Promise<RangedFile> {
  const handle = await open(path, "r");
  const opened = identityOf(await handle.stat());
  const was = seen ?? opened;
  const unchanged = async () => assertSameFile(path, was, identityOf(await handle.stat()));
  try {
    assertSameFile(path, was, opened);
  } catch (error) {
    await handle.close();
    throw error;
  }
  const size = was.size;
  return {
    byteLength: size,
    slice: async (start, end = size) => {
      const bytes = new Uint8Array(end - start);
      const { bytesRead } = await handle.read(bytes, 0, bytes.length, start);
      await unchanged();
      return bytesRead === bytes.length ? bytes.buffer : bytes.buffer.slice(0, bytesRead);
    },
    close: () => handle.close(),
    verify: async () => assertPathUnchanged(path, was),
  };
}

/** An S3 object read by ranged GETs, each of the version first seen (`InputChangedError` once it is replaced). */
export function s3Ranges(client: S3Client, location: string, pinned: ObjectVersion): RangedFile {
  const size = pinned.size;
  return {
    byteLength: size,
    slice: async (start, end = size) => {
      if (end <= start) return new ArrayBuffer(0);
      // The body is read inside the retried call: a reset mid-body refetches the range.
      const bytes = await storageCall("reading", location, async (signal) => {
        const got = await getPinned(client, location, pinned, { from: start, to: end - 1 }, signal);
        return (await got.Body?.transformToByteArray()) ?? new Uint8Array(0);
      });
      return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer;
    },
    close: async () => undefined,
  };
}

/** A value as a JSON record would hold it (see the module comment); objects and lists are converted all the way down. */
export function plainValue(value: unknown): unknown {
  switch (typeof value) {
    case "bigint":
      return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
    case "object": {
      if (value === null) return null;
      if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
      if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64");
      if (Array.isArray(value)) return value.map(plainValue);
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = plainValue(v);
      return out;
    }
    default:
      return value;
  }
}

function plainRow(row: Record<string, unknown>): Record<string, unknown> {
  for (const key in row) {
    const v = row[key];
    if (typeof v === "object" || typeof v === "bigint") row[key] = plainValue(v);
  }
  return row;
}

/**
 * The columns to fetch: the top-level columns the job's fields start with,
 * or every column when the job reads whole records or names a column the
 * file lacks (each record then fails naming the field, as a JSON one would).
 */
function projection(metadata: FileMetaData, fields: readonly string[] | undefined): string[] | undefined {
  if (!fields) return undefined;
  const names = new Set(parquetSchema(metadata).children.map((c) => c.element.name));
  const wanted = [...new Set(fields.map((f) => f.split(".")[0] as string))];
  return wanted.every((w) => names.has(w)) ? wanted : undefined;
}

/** Where a row group's bytes end in the file: past its last column chunk. */
function groupEnd(group: RowGroup): number {
  let end = 0;
  for (const { meta_data: m } of group.columns) {
    if (!m) continue;
    const start = Number(m.dictionary_page_offset ?? m.data_page_offset);
    end = Math.max(end, start + Number(m.total_compressed_size));
  }
  return end;
}

/**
 * The records of one Parquet file, a row group at a time. `line` is the row's
 * number in the file, from 1. `fields` are the dotted paths the job reads
 * (undefined: the whole record). Progress moves through the file's bytes as
 * row groups are read, whichever columns were fetched, and ends at its size.
 */
export async function* parquetItems(
  openFile: () => Promise<RangedFile>,
  source: string,
  firstSeq: number,
  counter: { bytes: number },
  fields?: readonly string[],
): AsyncGenerator<SourceItem> {
  let opened: RangedFile;
  try {
    opened = await openFile();
  } catch (error) {
    if (ownVerdict(error)) throw error;
    throw new SourceError(`cannot read ${source}: ${(error as Error).message}`);
  }
  const file = marked(opened);
  try {
    let metadata: FileMetaData;
    try {
      metadata = await parquetMetadataAsync(file);
    } catch (error) {
      if (ownVerdict(error)) throw error;
      if (error instanceof ReadFailure) throw new SourceError(`cannot read ${source}: ${error.message}`);
      throw new SourceError(`${source} is not a Parquet file that can be read: ${(error as Error).message}`);
    }
    const columns = projection(metadata, fields);
    let seq = firstSeq;
    let start = 0;
    let counted = 0;
    const advance = (to: number) => {
      if (to <= counted) return;
      counter.bytes += to - counted;
      counted = to;
    };
    for (const [g, group] of metadata.row_groups.entries()) {
      const end = start + Number(group.num_rows);
      let rows: (Record<string, unknown> | undefined)[];
      try {
        rows = await parquetReadObjects({ file, metadata, rowStart: start, rowEnd: end, compressors, ...(columns ? { columns } : {}) });
      } catch (error) {
        if (ownVerdict(error)) throw error;
        throw new SourceError(
          `${source}: row group ${g + 1} of ${metadata.row_groups.length} (rows ${start + 1}-${end}) cannot be read: ${(error as Error).message}`,
        );
      }
      advance(groupEnd(group));
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i] as Record<string, unknown>;
        // Dropped from the group as it is handed on: a record is collectable once the runner is done with it,
        // so a group's memory drains while it is consumed instead of lasting until the next group is read.
        rows[i] = undefined;
        yield { seq: seq++, line: start + i + 1, source, record: plainRow(row) };
      }
      start = end;
    }
    await opened.verify?.();
    advance(file.byteLength);
  } finally {
    await opened.close();
  }
}

/** Whether bytes start like a Parquet file ("PAR1"): read as text, it is garbage line after line. */
export function looksLikeParquet(first: Uint8Array): boolean {
  return first.length >= 4 && first[0] === 0x50 && first[1] === 0x41 && first[2] === 0x52 && first[3] === 0x31;
}
