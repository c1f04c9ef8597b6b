/**
 * Parquet in and out, on hyparquet and hyparquet-writer (pure JavaScript,
 * 1.3 MB installed with the decompressors; why these, in the README).
 *
 * Reading goes one row group at a time through byte ranges of the file (a
 * local file or an S3 object read by ranged GETs), so memory holds one row
 * group whatever the file's size, and only the columns a job names are
 * fetched. Values become what a JSON record would hold: 64-bit integers are
 * numbers (text beyond 2^53), timestamps ISO-8601 text, binary base64.
 *
 * Writing buffers rows into columns and emits a row group every
 * `ROW_GROUP_ROWS` rows, so an output of any length is written in flat
 * memory, its bytes handed on as each group is made.
 */
import { open } from "node:fs/promises";
import { GetObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { parquetMetadataAsync, parquetReadObjects, parquetSchema, type AsyncBuffer, type FileMetaData, type RowGroup } from "hyparquet";
import { compressors } from "hyparquet-compressors";
import { ByteWriter, ParquetWriter, type ColumnSource, type SchemaElement } from "hyparquet-writer";
import { assertNever, type ColumnKind, type FlatColumn, type OutputRow } from "./columns.js";
import { SourceError, type SourceItem } from "./sources.js";

/** Rows per row group written: DuckDB's default is 122,880, Spark's about 128 MB. */
export const ROW_GROUP_ROWS = 100_000;

/** A Parquet file's bytes by range; `close` releases what it holds. */
export interface RangedFile extends AsyncBuffer {
  close(): Promise<void>;
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
        throw new ReadFailure(`reading bytes ${start}-${end}: ${(error as Error).message}`);
      }
    },
  };
}

/** A local file read by ranges through one file handle. */
export async function localRanges(path: string): Promise<RangedFile> {
  const handle = await open(path, "r");
  const { size } = await handle.stat();
  return {
    byteLength: size,
    slice: async (start, end = size) => {
      const bytes = new Uint8Array(end - start);
      const { bytesRead } = await handle.read(bytes, 0, bytes.length, start);
      return bytesRead === bytes.length ? bytes.buffer : bytes.buffer.slice(0, bytesRead);
    },
    close: () => handle.close(),
  };
}

/** An S3 object read by ranged GETs. */
export function s3Ranges(client: S3Client, bucket: string, key: string, size: number): RangedFile {
  return {
    byteLength: size,
    slice: async (start, end = size) => {
      if (end <= start) return new ArrayBuffer(0);
      const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: `bytes=${start}-${end - 1}` }));
      const bytes = (await got.Body?.transformToByteArray()) ?? new Uint8Array(0);
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
    throw new SourceError(`cannot read ${source}: ${(error as Error).message}`);
  }
  const file = marked(opened);
  try {
    let metadata: FileMetaData;
    try {
      metadata = await parquetMetadataAsync(file);
    } catch (error) {
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
    advance(file.byteLength);
  } finally {
    await opened.close();
  }
}

/** Whether bytes start like a Parquet file ("PAR1"): read as text, it is garbage line after line. */
export function looksLikeParquet(first: Uint8Array): boolean {
  return first.length >= 4 && first[0] === 0x50 && first[1] === 0x41 && first[2] === 0x52 && first[3] === 0x31;
}

function schemaElement(column: FlatColumn): SchemaElement {
  const base = { name: column.name, repetition_type: "OPTIONAL" } as const;
  switch (column.kind) {
    case "string":
      return { ...base, type: "BYTE_ARRAY", converted_type: "UTF8" };
    case "json":
      return { ...base, type: "BYTE_ARRAY", converted_type: "JSON" };
    case "double":
      return { ...base, type: "DOUBLE" };
    case "int":
      return { ...base, type: "INT64", converted_type: "INT_64" };
    case "bool":
      return { ...base, type: "BOOLEAN" };
    default:
      return assertNever(column.kind);
  }
}

/** A cell as its column's kind stores it; anything that does not fit is null. */
function typed(kind: ColumnKind, value: unknown): unknown {
  if (value === undefined || value === null) return null;
  switch (kind) {
    case "string":
      return typeof value === "string" ? value : typeof value === "object" ? JSON.stringify(value) : String(value);
    case "json":
      return value; // the writer encodes JSON itself
    case "double":
      return typeof value === "number" ? value : null;
    case "int":
      return typeof value === "number" && Number.isSafeInteger(value) ? BigInt(value) : null;
    case "bool":
      return typeof value === "boolean" ? value : null;
    default:
      return assertNever(kind);
  }
}

const NOTHING = new Uint8Array(0);

/** Rows as Parquet, a row group at a time: `row` gives the bytes of a group when one is full, `end` the rest and the footer. */
export class ParquetEncoder {
  private readonly bytes = new ByteWriter();
  private readonly writer: ParquetWriter;
  private buffers: unknown[][];
  private held = 0;

  constructor(
    private readonly columns: readonly FlatColumn[],
    private readonly groupRows = ROW_GROUP_ROWS,
  ) {
    const schema: SchemaElement[] = [{ name: "root", num_children: columns.length }, ...columns.map(schemaElement)];
    this.writer = new ParquetWriter({ writer: this.bytes, schema, createdBy: "typed-eval" });
    this.buffers = columns.map(() => []);
  }

  row(r: OutputRow): Uint8Array {
    for (let c = 0; c < this.columns.length; c++) {
      const column = this.columns[c] as FlatColumn;
      (this.buffers[c] as unknown[]).push(typed(column.kind, column.value(r)));
    }
    if (++this.held >= this.groupRows) this.writeGroup();
    return this.take();
  }

  end(): Uint8Array {
    this.writeGroup();
    this.writer.finish();
    return this.take();
  }

  private writeGroup(): void {
    if (this.held === 0) return;
    const columnData = this.columns.map((c, i): ColumnSource => ({ name: c.name, data: this.buffers[i] as ColumnSource["data"] }));
    this.writer.write({ columnData, rowGroupSize: this.held });
    this.buffers = this.columns.map(() => []);
    this.held = 0;
  }

  /** The bytes made since the last call (a copy: the buffer is reused), often none. */
  private take(): Uint8Array {
    if (this.bytes.index === 0) return NOTHING;
    const chunk = Buffer.from(this.bytes.getBytes());
    this.bytes.index = 0;
    return chunk;
  }
}
