/** JSONL: one JSON object per line, records nested as they are (the answers as the API returns them). */
import { isUtf8 } from "node:buffer";
import type { Readable } from "node:stream";
import { depthExceededAt, MAX_JSON_DEPTH } from "../api/json.js";
import { type Format, textEncoder } from "./format.js";
import type { SourceItem } from "./source.js";
import { byteLines, firstInvalidUtf8, formatBytes, MAX_RECORD_BYTES } from "./text.js";

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

/** JSONL (also `.ndjson`): read line by line, each line's UTF-8 checked on its own; written one record per line. */
export const JSONL: Format = {
  name: "jsonl",
  title: "JSONL",
  extensions: [".jsonl", ".ndjson"],
  contentType: "application/x-ndjson",
  layout: "records",
  typed: false,
  gzip: true,
  read: { stream: jsonlItems },
  write: (table) => textEncoder("", (r) => `${JSON.stringify(table.record(r))}\n`),
};
