/**
 * Bytes of text formats, before any format parses them: lines split without
 * decoding (so each line's UTF-8 is checked on its own), UTF-8 checks that
 * name the byte, and the longest record read.
 */
import { isUtf8 } from "node:buffer";
import { Transform } from "node:stream";
import { SourceError } from "../api/verdict.js";

/** Longest input line or CSV record read; longer ones become error rows without being held in memory. */
export const MAX_RECORD_BYTES = 64 * 1024 * 1024;

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

/** Passes bytes through, failing the stream at the first invalid UTF-8 (CSV records span lines, so there is no row to blame). */
export function utf8Checked(source: string): Transform {
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
