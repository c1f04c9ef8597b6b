/**
 * Parquet values as a record holds them, where hyparquet's defaults would
 * lose what the file says: timestamps are cut to milliseconds and all read
 * as UTC, dates become midnight timestamps, binary is decoded as UTF-8 (the
 * bytes lost to replacement characters), INTERVAL and BSON stop the read.
 *
 * So the file's schema decides: a binary column without a text annotation
 * stays bytes (base64 in the record, as DuckDB and pyarrow read it as
 * binary); timestamps, times, dates and intervals are text that keeps their
 * unit and time zone (time-text.ts); an ENUM is text. hyparquet hands the
 * temporal leaves over raw (their annotation taken off the file's metadata,
 * read for this one reading), and `recordDecoder` turns them into text, leaf
 * by leaf, through structs, lists and maps.
 */
import type { FileMetaData, ParquetParsers, SchemaElement, SchemaTree } from "hyparquet";
import { parquetSchema } from "hyparquet";
import { dateText, intervalText, type TimeUnit, timestampText, timeText } from "./time-text.js";

type Decode = (value: unknown) => unknown;

const UNITS: Record<"MILLIS" | "MICROS" | "NANOS", TimeUnit> = { MILLIS: "ms", MICROS: "us", NANOS: "ns" };

/**
 * What hyparquet's parsers still do once `recordDecoder` took the temporal
 * annotations off: INT96 (legacy Spark and Impala timestamps, nanoseconds
 * without a time zone, as pyarrow reads them) and DATE.
 */
export const PARSERS: Partial<ParquetParsers> = {
  timestampFromNanoseconds: (nanos: bigint) => timestampText(nanos, "ns", false),
  dateFromDays: (days: number) => dateText(days),
};

/** A decoder applied to a value or, for a repeated field, to each of its values; null stays null. */
function each(decode: Decode): Decode {
  const one = (v: unknown) => (v === null || v === undefined ? v : decode(v));
  return (v) => (Array.isArray(v) ? v.map(one) : one(v));
}

const asBigInt = (v: unknown): unknown => (typeof v === "bigint" ? v : typeof v === "number" ? BigInt(v) : undefined);

/** A time value's decoder: its count (an int32 for milliseconds, an int64 otherwise) as text. */
function temporal(format: (count: bigint) => string): Decode {
  return (v) => {
    const count = asBigInt(v);
    return typeof count === "bigint" ? format(count) : v;
  };
}

/**
 * The decoder of a leaf whose type hyparquet would read lossily, with its
 * annotation taken off the element so hyparquet hands the raw value over;
 * undefined for a leaf read as it is.
 */
function leafDecoder(e: SchemaElement): Decode | undefined {
  const logical = e.logical_type;
  const converted = e.converted_type;
  const strip = () => {
    delete e.logical_type;
    delete e.converted_type;
  };
  if (logical?.type === "TIMESTAMP" || converted === "TIMESTAMP_MILLIS" || converted === "TIMESTAMP_MICROS") {
    // The converted types alone (older writers) mean an instant in UTC, as the Parquet spec says.
    const unit = logical?.type === "TIMESTAMP" ? UNITS[logical.unit] : converted === "TIMESTAMP_MILLIS" ? "ms" : "us";
    const utc = logical?.type === "TIMESTAMP" ? logical.isAdjustedToUTC : true;
    strip();
    return temporal((count) => timestampText(count, unit, utc));
  }
  if (logical?.type === "TIME" || converted === "TIME_MILLIS" || converted === "TIME_MICROS") {
    const unit = logical?.type === "TIME" ? UNITS[logical.unit] : converted === "TIME_MILLIS" ? "ms" : "us";
    const utc = logical?.type === "TIME" ? logical.isAdjustedToUTC : true;
    strip();
    return temporal((count) => timeText(count, unit, utc));
  }
  if (logical?.type === "INTERVAL" || converted === "INTERVAL") {
    strip();
    return (v) => (v instanceof Uint8Array && v.byteLength === 12 ? intervalText(v) : v);
  }
  if (logical?.type === "ENUM" || converted === "ENUM") {
    delete e.logical_type;
    e.converted_type = "UTF8";
  } else if (logical?.type === "BSON" || converted === "BSON") {
    // hyparquet cannot read BSON; its bytes are kept (base64), as any binary is.
    strip();
  }
  return undefined;
}

/** hyparquet's test for a column it assembles as a list (schema.js): a LIST of one repeated group of one field, or of the field itself. */
function listElement(node: SchemaTree): SchemaTree | undefined {
  const middle = node.children[0];
  if (node.element.converted_type !== "LIST" || node.children.length !== 1 || !middle) return undefined;
  if (middle.children.length > 1 || middle.element.repetition_type !== "REPEATED") return undefined;
  return middle.children.length === 1 ? middle.children[0] : middle;
}

/** hyparquet's test for a column it assembles as a map (an object from key to value): its value field. */
function mapValue(node: SchemaTree): SchemaTree | undefined {
  const middle = node.children[0];
  if (node.element.converted_type !== "MAP" || node.children.length !== 1 || middle?.children.length !== 2) return undefined;
  if (middle.element.repetition_type !== "REPEATED") return undefined;
  return middle.children.find((c) => c.element.name === "value");
}

/** The decoder of a column's values, built over its whole subtree (each leaf's annotation is settled on the way, once); undefined when nothing in it needs one. */
function nodeDecoder(node: SchemaTree): Decode | undefined {
  if (node.children.length === 0) {
    const leaf = leafDecoder(node.element);
    return leaf && each(leaf);
  }
  const list = listElement(node);
  if (list) {
    const element = nodeDecoder(list);
    return element && ((v) => (Array.isArray(v) ? v.map((x) => (x === null || x === undefined ? x : element(x))) : v));
  }
  const value = mapValue(node);
  if (value) {
    // Keys are settled too (an INTERVAL key would stop the read), though an object's keys stay as hyparquet wrote them.
    for (const field of (node.children[0] as SchemaTree).children) if (field !== value) nodeDecoder(field);
    const decode = nodeDecoder(value);
    return (
      decode &&
      each((v) => {
        if (typeof v !== "object" || v === null) return v;
        const map = v as Record<string, unknown>;
        for (const key of Object.keys(map)) map[key] = decode(map[key]);
        return map;
      })
    );
  }
  const decoded = node.children.flatMap((child) => {
    const decode = nodeDecoder(child);
    return decode ? [[child.element.name, decode] as const] : [];
  });
  if (decoded.length === 0) return undefined;
  return each((v) => {
    if (typeof v !== "object" || v === null) return v;
    const struct = v as Record<string, unknown>;
    for (const [name, decode] of decoded) if (name in struct) struct[name] = decode(struct[name]);
    return struct;
  });
}

/**
 * The decoders of a file's top-level columns, by name, for the columns that
 * need one. Settles the schema first: call it on the metadata before any
 * read (it takes the temporal annotations off, so hyparquet reads those
 * leaves raw).
 */
export function recordDecoder(metadata: FileMetaData): ReadonlyMap<string, Decode> {
  const decoders = new Map<string, Decode>();
  for (const column of parquetSchema(metadata).children) {
    const decode = nodeDecoder(column);
    if (decode) decoders.set(column.element.name, decode);
  }
  return decoders;
}
