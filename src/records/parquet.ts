/**
 * Parquet, read on hyparquet and written on hyparquet-writer (pure
 * JavaScript, 1.3 MB installed with the decompressors; why these, in the
 * README).
 *
 * Reading goes one row group at a time through byte ranges of the file (a
 * local file or an S3 object read by ranged GETs), so memory holds one row
 * group whatever the file's size, and only the columns a job names are
 * fetched. Values become what a JSON record would hold: 64-bit integers are
 * numbers (text beyond 2^53), timestamps and dates ISO 8601 text keeping
 * their unit and time zone, binary base64 (parquet-values.ts); a float's NaN
 * stays NaN in the record (JSON has no form for it: see the docs).
 */
import { parquetMetadataAsync, parquetReadObjects, parquetSchema, type AsyncBuffer, type FileMetaData, type RowGroup } from "hyparquet";
import { compressors } from "hyparquet-compressors";
import type { SourceItem } from "./source.js";
import { InvocationError } from "../api/errors.js";
import { InputChangedError, SourceError, StorageError } from "../api/verdict.js";
import { ByteWriter, ParquetWriter, type ColumnSource, type SchemaElement } from "hyparquet-writer";
import type { Column, ColumnKind, Format, RangedFile, RowEncoder, Table } from "./format.js";
import { PARSERS, recordDecoder } from "./parquet-values.js";
import { dateDays, type TimeUnit, timestampCount } from "./time-text.js";

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

function plainRow(row: Record<string, unknown>, decoders: ReadonlyMap<string, (value: unknown) => unknown>): Record<string, unknown> {
  for (const [key, decode] of decoders) if (key in row) row[key] = decode(row[key]);
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

/** One row group's rows, fetching only `columns` (all when undefined); a group that cannot be read stops the input, named. */
async function readGroup(
  file: AsyncBuffer,
  metadata: FileMetaData,
  source: string,
  g: number,
  start: number,
  end: number,
  columns: string[] | undefined,
): Promise<(Record<string, unknown> | undefined)[]> {
  try {
    // utf8: false keeps a binary column's bytes (text columns carry their annotation and are still text).
    const options = { file, metadata, rowStart: start, rowEnd: end, compressors, utf8: false, parsers: PARSERS };
    return await parquetReadObjects(columns ? { ...options, columns } : options);
  } catch (error) {
    if (ownVerdict(error)) throw error;
    throw new SourceError(
      `${source}: row group ${g + 1} of ${metadata.row_groups.length} (rows ${start + 1}-${end}) cannot be read: ${(error as Error).message}`,
    );
  }
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
  fields?: readonly string[] | undefined,
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
    const decoders = recordDecoder(metadata);
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
      const rows = await readGroup(file, metadata, source, g, start, end, columns);
      advance(groupEnd(group));
      for (let i = 0; i < rows.length; i++) {
        const row = rows[i] as Record<string, unknown>;
        // Dropped from the group as it is handed on: a record is collectable once the runner is done with it,
        // so a group's memory drains while it is consumed instead of lasting until the next group is read.
        rows[i] = undefined;
        yield { seq: seq++, line: start + i + 1, source, record: plainRow(row, decoders) };
      }
      start = end;
    }
    await opened.verify?.();
    advance(file.byteLength);
  } finally {
    await opened.close();
  }
}

/** Written a row group at a time (see ParquetEncoder). */
/** Rows per row group written: DuckDB's default is 122,880, Spark's about 128 MB. */
export const ROW_GROUP_ROWS = 100_000;

/** A temporal kind's unit and zone (`timestamptz-us`: microseconds, UTC). */
function timestampOf(kind: ColumnKind): { unit: TimeUnit; utc: boolean } | undefined {
  const match = /^timestamp(tz)?-(ms|us|ns)$/.exec(kind);
  return match ? { unit: match[2] as TimeUnit, utc: match[1] === "tz" } : undefined;
}

const PARQUET_UNITS = { ms: "MILLIS", us: "MICROS", ns: "NANOS" } as const;
/** The older annotation beside the logical type, as DuckDB writes it: readers that know only converted types (DuckDB's TIMESTAMP_MS among them) read the unit from it. */
const CONVERTED_UNITS = { ms: { converted_type: "TIMESTAMP_MILLIS" }, us: { converted_type: "TIMESTAMP_MICROS" }, ns: {} } as const;

function schemaElement<R>(column: Column<R>): SchemaElement {
  const base = { name: column.name, repetition_type: "OPTIONAL" } as const;
  const timestamp = timestampOf(column.kind);
  if (timestamp) {
    const { unit, utc } = timestamp;
    return { ...base, type: "INT64", ...CONVERTED_UNITS[unit], logical_type: { type: "TIMESTAMP", isAdjustedToUTC: utc, unit: PARQUET_UNITS[unit] } };
  }
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
    case "date":
      return { ...base, type: "INT32", converted_type: "DATE" };
    default:
      throw new TypeError(`unexpected column kind ${JSON.stringify(column.kind)}`);
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
      // NaN and the infinities too: a DOUBLE holds them (JSON cannot).
      return typeof value === "number" ? value : null;
    case "int":
      return typeof value === "number" && Number.isSafeInteger(value) ? BigInt(value) : null;
    case "bool":
      return typeof value === "boolean" ? value : null;
    case "date":
      return typeof value === "string" ? (dateDays(value) ?? null) : null;
    default: {
      const timestamp = timestampOf(kind);
      if (!timestamp) throw new TypeError(`unexpected column kind ${JSON.stringify(kind)}`);
      return typeof value === "string" ? (timestampCount(value, timestamp.unit) ?? null) : null;
    }
  }
}

const NOTHING = new Uint8Array(0);

/** Rows as Parquet, a row group at a time: `row` gives the bytes of a group when one is full, `end` the rest and the footer. */
export class ParquetEncoder<R> implements RowEncoder<R> {
  private readonly bytes = new ByteWriter();
  private readonly writer: ParquetWriter;
  private buffers: unknown[][];
  private held = 0;

  constructor(
    private readonly columns: readonly Column<R>[],
    private readonly groupRows = ROW_GROUP_ROWS,
  ) {
    const schema: SchemaElement[] = [{ name: "root", num_children: columns.length }, ...columns.map(schemaElement)];
    this.writer = new ParquetWriter({ writer: this.bytes, schema, createdBy: "typed-eval" });
    this.buffers = columns.map(() => []);
  }

  row(r: R): Uint8Array {
    for (let c = 0; c < this.columns.length; c++) {
      const column = this.columns[c] as Column<R>;
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

/** Parquet (also `.parq`, `.pq`): read by ranges, a row group at a time, only the columns a job names; written typed. */
export const PARQUET: Format = {
  name: "parquet",
  title: "Parquet",
  extensions: [".parquet", ".parq", ".pq"],
  contentType: "application/vnd.apache.parquet",
  layout: "columns",
  typed: true,
  // It compresses inside (per column chunk); a gzipped file could not be read by ranges.
  gzip: false,
  signature: Buffer.from("PAR1"),
  read: { ranged: parquetItems },
  write: <R>(table: Table<R>) => new ParquetEncoder(table.columns),
};
