/**
 * Parquet out, on hyparquet-writer. Writing buffers rows into columns and
 * emits a row group every `ROW_GROUP_ROWS` rows, so an output of any length is
 * written in flat memory, its bytes handed on as each group is made.
 */
import { ByteWriter, ParquetWriter, type ColumnSource, type SchemaElement } from "hyparquet-writer";
import { assertNever, type ColumnKind, type FlatColumn, type OutputRow } from "./columns.js";

/** Rows per row group written: DuckDB's default is 122,880, Spark's about 128 MB. */
export const ROW_GROUP_ROWS = 100_000;

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
