import { mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { describeSystemError } from "../api/system-errors.js";
import { UsageError } from "./exit.js";

/**
 * Makes the folder a file will be written in, or says in one line why it
 * cannot (a path through an existing file, no permission): a usage error.
 */
export function folderFor(path: string, flag: string): void {
  try {
    mkdirSync(dirname(resolve(path)), { recursive: true });
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    const why =
      e.code === "EEXIST" || e.code === "ENOTDIR"
        ? `part of ${dirname(path)} is a file, not a folder`
        : e.code === "EACCES"
          ? `no permission to create ${dirname(path)}`
          : e.message;
    throw new UsageError(`cannot write ${flag} ${path}: ${why}; choose another path`);
  }
}

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

/**
 * Checks, before any work is done, that a whole file can be written at
 * `path`: its folder exists or can be made, the path is not a directory, and
 * a file can be created beside it. Otherwise a usage error naming the flag.
 */
export function checkWritable(path: string, flag: string): void {
  folderFor(path, flag);
  let why: string | undefined;
  if (statSync(path, { throwIfNoEntry: false })?.isDirectory()) why = "it is a directory, not a file";
  else {
    const probe = `${path}.partial`;
    try {
      writeFileSync(probe, "");
      rmSync(probe, { force: true });
    } catch (error) {
      why = whyNotWritable(error, dirname(path));
    }
  }
  if (why !== undefined) throw new UsageError(`cannot write ${flag} ${path}: ${why}; choose another path`);
}

/** Writes a whole file (text or bytes) under a temporary name and renames it, so a failure never leaves half a file. */
export function writeFileAtomic(path: string, text: string | Uint8Array, flag = "--output"): void {
  checkWritable(path, flag);
  const partial = `${path}.partial`;
  try {
    writeFileSync(partial, text);
    renameSync(partial, path);
  } catch (error) {
    rmSync(partial, { force: true });
    // Space or permission lost since the check: still a line naming what was being written.
    throw new UsageError(`cannot write ${flag} ${path}: ${whyNotWritable(error, dirname(path))}`);
  }
}
