/**
 * A local input's identity while it is read: device, inode, size and
 * modification time, taken before the read, compared when the file is opened
 * (the path may name another file by then), as it is read and after the
 * last byte. A file rewritten in place, appended to, truncated or replaced
 * meanwhile ends the read with `InputChangedError`: the records read would
 * not be one input.
 */
import { type Stats, statSync } from "node:fs";
import { Transform } from "node:stream";
import { InputChangedError } from "../api/verdict.js";

export interface FileIdentity {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
}

/** The identity of what `stats` describes. */
export function identityOf(stats: Pick<Stats, "dev" | "ino" | "size" | "mtimeMs">): FileIdentity {
  return { dev: stats.dev, ino: stats.ino, size: stats.size, mtimeMs: stats.mtimeMs };
}

/** What differs between two identities of a file, in a few words; undefined when they are the same. */
function difference(was: FileIdentity, now: FileIdentity): string | undefined {
  if (was.dev !== now.dev || was.ino !== now.ino) return "it was replaced by another file";
  if (was.size !== now.size) return `it was ${was.size} bytes, now ${now.size}`;
  if (was.mtimeMs !== now.mtimeMs) return "it was modified";
  return undefined;
}

/** Throws `InputChangedError` unless `now` is the identity the read began with. */
export function assertSameFile(path: string, was: FileIdentity, now: FileIdentity): void {
  const why = difference(was, now);
  if (why) throw new InputChangedError(`${path} changed while it was read (${why})`, path);
}

/** Throws `InputChangedError` unless the file at `path` is still the one the read began with (gone counts as changed). */
export function assertPathUnchanged(path: string, was: FileIdentity): void {
  let now: Stats;
  try {
    now = statSync(path);
  } catch {
    throw new InputChangedError(`${path} changed while it was read (it is gone)`, path);
  }
  assertSameFile(path, was, identityOf(now));
}

/** Passes bytes through; at their end, before the reader sees it, fails unless the file at `path` is still `was`. */
export function checkedAtEnd(path: string, was: FileIdentity): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      callback(null, chunk);
    },
    flush(callback) {
      try {
        assertPathUnchanged(path, was);
        callback();
      } catch (error) {
        callback(error as Error);
      }
    },
  });
}
