/**
 * Local files that typed-eval writes whole: the one check that a file can be
 * written, made before any work (its folder made, no directory in its
 * place, a byte written beside it), and the one way a whole file replaces
 * another (a temporary file beside it, flushed, renamed over it, the folder
 * flushed). Every command and the run use these; a refusal is one line,
 * `cannot write <flag> <path>: <why>; choose another path`.
 */
import { randomBytes } from "node:crypto";
import {
  closeSync,
  fchmodSync,
  fchownSync,
  fsyncSync,
  mkdirSync,
  openSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import { InvocationError } from "../api/errors.js";
import { describeSystemError } from "../api/system-errors.js";

/** Why a file cannot be created in `folder`, for the errors the file system gives. */
function whyNotWritable(error: unknown, folder: string): string {
  switch ((error as NodeJS.ErrnoException).code) {
    case "EACCES":
    case "EPERM":
      return `no permission to create files in ${folder}`;
    case "EROFS":
      return `${folder} is on a read-only file system`;
    case "ENOSPC":
    case "EDQUOT":
      return `no space left on the device holding ${folder}`;
    default:
      return describeSystemError(error) ?? (error as Error).message;
  }
}

/** The one-line refusal to write `path`, naming the flag or file that named it. */
function cannotWrite(flag: string, path: string, why: string): InvocationError {
  return new InvocationError(`cannot write ${flag} ${path}: ${why}; choose another path`);
}

/**
 * Checks, before any work is done, that a whole file can be written at
 * `path`: its folder exists or can be made, neither the path nor its
 * `.partial` is a directory, and a byte can be written in the folder (so a
 * full disk or a read-only mount is found here, not when the work is done;
 * written, not asked: access() says yes to root on a read-only mount).
 * Otherwise an `InvocationError` naming `flag`.
 */
export function checkWritableFile(path: string, flag: string): void {
  const folder = dirname(resolve(path));
  try {
    mkdirSync(folder, { recursive: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === "EEXIST" || code === "ENOTDIR"
        ? `part of ${dirname(path)} is a file, not a folder`
        : code === "EACCES"
          ? `no permission to create ${dirname(path)}`
          : whyNotWritable(error, dirname(path));
    throw cannotWrite(flag, path, why);
  }
  if (statSync(path, { throwIfNoEntry: false })?.isDirectory()) throw cannotWrite(flag, path, "it is a directory, not a file");
  const partial = `${path}.partial`;
  if (statSync(partial, { throwIfNoEntry: false })?.isDirectory())
    throw cannotWrite(flag, path, `${partial} is a directory, and the file is written there first`);
  const probe = join(folder, `.typed-eval-check-${process.pid}`);
  try {
    writeFileSync(probe, "\n");
  } catch (error) {
    throw cannotWrite(flag, path, whyNotWritable(error, dirname(path)));
  } finally {
    rmSync(probe, { force: true });
  }
}

/**
 * The same check as `checkWritableFile` for a file whose folders are made
 * only when it is written (an S3 output's staging copy): nothing is created
 * now. The nearest folder that exists must be a folder and take a file, and
 * the path must not be a directory.
 */
export function checkCreatableFile(path: string, flag: string): void {
  const exists = (at: string) => {
    try {
      return statSync(at, { throwIfNoEntry: false });
    } catch {
      // ENOTDIR: a file on the way, found as the nearest thing that exists.
      return undefined;
    }
  };
  let folder = dirname(resolve(path));
  while (exists(folder) === undefined && dirname(folder) !== folder) folder = dirname(folder);
  if (!exists(folder)?.isDirectory()) throw cannotWrite(flag, path, `part of ${dirname(path)} is a file, not a folder`);
  if (statSync(path, { throwIfNoEntry: false })?.isDirectory()) throw cannotWrite(flag, path, "it is a directory, not a file");
  const probe = join(folder, `.typed-eval-check-${process.pid}`);
  try {
    writeFileSync(probe, "\n");
  } catch (error) {
    throw cannotWrite(flag, path, whyNotWritable(error, folder));
  } finally {
    rmSync(probe, { force: true });
  }
}

/** Flushes a folder's entries (a rename) to disk; a file system that cannot is left to its own guarantees. */
export function syncFolder(path: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dirname(path), "r");
    fsyncSync(fd);
  } catch {
    // Not every file system lets a folder be opened or flushed.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Replaces the file at `path` with `data` so that a reader sees the old file
 * or the new one, never a part: a temporary file beside it, flushed, renamed
 * over it, and the folder flushed. The new file keeps the old one's mode and
 * owner (`mode`, else 0666 less the umask, for a new file); a symbolic link
 * is followed, not replaced. Throws the file system's error, the temporary
 * file removed.
 */
export function replaceFile(path: string, data: string | Uint8Array, options: { mode?: number } = {}): void {
  const target = statSync(path, { throwIfNoEntry: false }) ? realpathSync(path) : path;
  const old = statSync(target, { throwIfNoEntry: false });
  const mode = old ? old.mode & 0o7777 : options.mode;
  const temp = `${target}.${process.pid}.${randomBytes(4).toString("hex")}.partial`;
  const fd = openSync(temp, "wx", mode ?? 0o666);
  try {
    writeAll(fd, data);
    // The umask may have narrowed a mode that was asked for.
    if (mode !== undefined) fchmodSync(fd, mode);
    if (old && (old.uid !== process.getuid?.() || old.gid !== process.getgid?.())) {
      try {
        fchownSync(fd, old.uid, old.gid);
      } catch {
        // Only root may give a file away: otherwise it stays ours, with the old mode.
      }
    }
    fsyncSync(fd);
    closeSync(fd);
    renameSync(temp, target);
  } catch (error) {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
    rmSync(temp, { force: true });
    throw error;
  }
  syncFolder(target);
}

/** Writes all of `data` (writeSync may write less than it is given). */
function writeAll(fd: number, data: string | Uint8Array): void {
  const bytes = typeof data === "string" ? Buffer.from(data) : data;
  for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at);
}

/** Checks, then replaces: a whole file at `path`, or a one-line `InvocationError` naming `flag` (space or permission lost since the check included). */
export function writeWholeFile(path: string, data: string | Uint8Array, flag: string): void {
  checkWritableFile(path, flag);
  try {
    replaceFile(path, data);
  } catch (error) {
    throw cannotWrite(flag, path, whyNotWritable(error, dirname(path)));
  }
}
