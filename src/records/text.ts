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

/** How far into a stream its first line end is looked for; a stream with none by then passes as it is. */
const FIRST_LINE_SCAN = 64 * 1024;

/** Each CR CR LF as CR LF, in Latin-1 so every byte maps to itself. */
const singled = (bytes: Buffer): Buffer => Buffer.from(bytes.toString("latin1").replaceAll("\r\r\n", "\r\n"), "latin1");

/**
 * Passes bytes through; when the first line ends in CR CR LF (a file given
 * Windows line ends twice over, which CSV readers take for two line ends
 * with an empty line or a phantom record between), each CR CR LF becomes
 * CR LF, and `found` is called once.
 */
export function singleLineEnds(found: () => void): Transform {
  let mode: "unknown" | "plain" | "doubled" = "unknown";
  let held: Buffer = Buffer.alloc(0);
  /** The mode the first line end shows; still unknown while it may continue past the bytes seen. */
  const decide = (bytes: Buffer): typeof mode => {
    const cr = bytes.indexOf(13);
    const lf = bytes.indexOf(10);
    const first = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
    if (first === -1) return bytes.length > FIRST_LINE_SCAN ? "plain" : "unknown";
    if (bytes[first] === 10) return "plain";
    const [next, after] = [bytes[first + 1], bytes[first + 2]];
    if (next !== 13) return next === undefined ? "unknown" : "plain";
    if (after === undefined) return "unknown";
    return after === 10 ? "doubled" : "plain";
  };
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      const bytes = held.length > 0 ? Buffer.concat([held, chunk]) : chunk;
      held = Buffer.alloc(0);
      if (mode === "unknown") {
        mode = decide(bytes);
        if (mode === "doubled") found();
      }
      if (mode === "unknown") {
        held = bytes;
        return callback();
      }
      if (mode === "plain") return callback(null, bytes);
      // CRs at the end wait for the next chunk: they may begin a CR CR LF cut by the boundary.
      let cut = bytes.length;
      while (cut > 0 && bytes.length - cut < 2 && bytes[cut - 1] === 13) cut--;
      held = Buffer.from(bytes.subarray(cut));
      callback(null, singled(bytes.subarray(0, cut)));
    },
    flush(callback) {
      callback(null, mode === "doubled" ? singled(held) : held);
    },
  });
}
