/**
 * Where outputs go, every write checked. A file is written under
 * `<path>.partial`, flushed to disk, its size checked against what was
 * written, and only then renamed into place (and the rename flushed): a
 * full disk, a refused write or a crash never leaves a file that looks
 * complete. Stdout's errors are kept too: a closed pipe (`| head -1`,
 * EPIPE) is the reader stopping the run (`OutputClosedError`), a full or
 * refused one (`> /dev/full`) the disk's error. Errors from a write, the
 * flush and the close all reach the caller; none is only logged.
 */
import { closeSync, fstatSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { outputClosed } from "../../api/verdict.js";
import { syncFolder } from "../../records/local-files.js";

/** An output being written: chunks in (each awaited), then `commit` makes it final or `abort` discards it. */
export interface Sink {
  write(chunk: string | Uint8Array): Promise<void>;
  /** Makes the output final; a `stop` during a commit that takes time (an upload) ends it with nothing made final. */
  commit(stop?: AbortSignal): Promise<void>;
  abort(): Promise<void>;
}

/** Where an output goes: stdout, a path, or anything else that takes a sink (S3). */
export interface OutputTarget {
  open(): Sink;
  describe: string;
}

/** Bytes gathered before a write to the file: few system calls, and the event loop gets a turn between them. */
const FLUSH_BYTES = 1 << 16;

/** A file written as `<path>.partial` and renamed over `path` once complete and on disk; `onCommitted` runs after the rename, with the commit's stop. */
export function partialFile(path: string, onCommitted?: (stop: AbortSignal | undefined) => Promise<void>): Sink {
  const partial = `${path}.partial`;
  const fd = openSync(partial, "w");
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let written = 0;
  let closed = false;
  const flush = () => {
    const data = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending);
    pending = [];
    pendingBytes = 0;
    onDisk(path, () => {
      for (let at = 0; at < data.length; ) at += writeSync(fd, data, at, data.length - at);
    });
    written += data.length;
  };
  const close = () => {
    if (closed) return;
    closed = true;
    onDisk(path, () => closeSync(fd));
  };
  return {
    write: async (chunk) => {
      if (chunk.length === 0) return;
      const bytes = typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      pending.push(bytes);
      pendingBytes += bytes.length;
      if (pendingBytes < FLUSH_BYTES) return;
      flush();
      // A turn for timers and signals: a stop during a long write is seen.
      await new Promise<void>((resolve) => setImmediate(resolve));
    },
    commit: async (stop) => {
      if (pendingBytes > 0) flush();
      onDisk(path, () => fsyncSync(fd));
      const size = fstatSync(fd).size;
      close();
      if (size !== written) throw Object.assign(new Error(`${partial} holds ${size} bytes, not the ${written} written`), { code: "EIO", path: partial });
      renameSync(partial, path);
      syncFolder(path);
      await onCommitted?.(stop);
    },
    abort: async () => {
      try {
        close();
      } finally {
        rmSync(partial, { force: true });
      }
    },
  };
}

/**
 * Runs a write to the file at `path`: its error names the file (a write, a
 * flush or a close says ENOSPC without a path, and "no space left on the
 * device" alone does not say which output, on which disk).
 */
function onDisk<T>(path: string, work: () => T): T {
  try {
    return work();
  } catch (error) {
    if (error instanceof Error && (error as NodeJS.ErrnoException).path === undefined) Object.assign(error, { path });
    throw error;
  }
}

/** Stdout as an output: each write waits for the pipe, and its errors end the write (EPIPE as the reader closing it). */
export function stdoutSink(out: NodeJS.WriteStream = process.stdout): Sink {
  let failure: Error | undefined;
  const onError = (error: Error) => {
    failure ??= closedOrError(error);
  };
  out.on("error", onError);
  const settled = (chunk: string | Uint8Array) =>
    new Promise<void>((resolve, reject) => {
      if (failure) return reject(failure);
      out.write(chunk, (error) => {
        if (error) failure ??= closedOrError(error);
        return failure ? reject(failure) : resolve();
      });
    });
  let last: Promise<void> = Promise.resolve();
  return {
    write: async (chunk) => {
      if (failure) throw failure;
      if (chunk.length === 0) return;
      const done = settled(chunk);
      // Its failure is kept in `failure` and thrown by the next write or the commit, never left unobserved.
      done.catch(() => undefined);
      last = done;
      // Waits only when the pipe is full; the last write's outcome is awaited at the commit.
      if (out.writableNeedDrain) await last;
    },
    commit: async () => {
      try {
        await last;
        await settled("");
      } finally {
        detach(out, onError);
      }
    },
    abort: async () => detach(out, onError),
  };
}

/** An error the stream reports after its sink is done (a failed write's late event): already told, never a crash. */
function lateError(): void {}

function detach(out: NodeJS.WriteStream, onError: (error: Error) => void): void {
  out.off("error", onError);
  if (!out.listeners("error").includes(lateError)) out.on("error", lateError);
}

function closedOrError(error: Error): Error {
  const closed = outputClosed(error);
  if (closed) return closed;
  // A write to stdout names no path: the message says which output it was (`-o - > /dev/full`).
  if ((error as NodeJS.ErrnoException).path === undefined) Object.assign(error, { path: "stdout" });
  return error;
}

/** A local path (written as `<path>.partial`, renamed once complete) or stdout for "-". */
export function localTarget(location: string): OutputTarget {
  if (location === "-") return { describe: "stdout", open: () => stdoutSink() };
  return { describe: location, open: () => partialFile(location) };
}
