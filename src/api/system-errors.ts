/**
 * Operating-system and library errors in one line a user can act on: the
 * address in use, a permission, a read-only or full file system, a directory
 * where a file belongs, a host that does not answer, a file that is not a
 * model. Callers choose the exit code (the same EACCES is a bad invocation
 * before a run starts and a storage failure in the middle of one).
 *
 * Also the one classifier of those errors by kind: a network failure (the
 * store, an endpoint or a download host did not answer: worth retrying) or a
 * file system refusing (the user's path before a run, the disk's failure
 * during one). S3 retries, the run's storage verdict and the check stage all
 * ask it.
 */

interface SystemError extends Error {
  code?: string;
  path?: string;
  dest?: string;
  syscall?: string;
  address?: string;
  port?: number;
  hostname?: string;
}

function where(e: SystemError): string {
  if (e.path) return e.path;
  if (e.address) return e.port === undefined ? e.address : `${e.address}:${e.port}`;
  return e.hostname ?? "";
}

const BY_CODE: Record<string, (e: SystemError) => string> = {
  EADDRINUSE: (e) => `the address ${where(e)} is already in use: stop whatever listens there, or choose another --port`,
  EADDRNOTAVAIL: (e) => `the address ${where(e)} is not an address of this machine: choose another --host`,
  EACCES: (e) =>
    `permission denied: ${where(e)}${e.syscall === "listen" ? " (ports below 1024 need privileges: choose another --port)" : ": check its owner and mode, or choose another path"}`,
  EPERM: (e) => `operation not permitted: ${where(e)}: check its owner and mode, or choose another path`,
  EROFS: (e) => `read-only file system: ${where(e)}: choose a path on a writable file system`,
  ENOSPC: (e) => `no space left on the device${e.path ? ` holding ${e.path}` : ""}: free some space`,
  EDQUOT: (e) => `disk quota exceeded${e.path ? ` writing ${e.path}` : ""}: free some space or raise the quota`,
  EISDIR: (e) => `${where(e)} is a directory where a file is expected: name a file`,
  ENOTDIR: (e) => `a part of ${where(e)} is a file where a directory is expected`,
  ENOENT: (e) => `no such file or directory: ${where(e)}`,
  EIO: (e) => `input/output error${e.path ? ` on ${e.path}` : ""}: the disk or its file system failed`,
  EEXIST: (e) => `${where(e)} already exists`,
  EMFILE: () => "too many open files: raise the limit (ulimit -n) or lower --concurrency",
  ECONNREFUSED: (e) => `connection refused by ${where(e)}: is the server running?`,
  ECONNRESET: (e) => `the connection${where(e) ? ` to ${where(e)}` : ""} was reset`,
  ETIMEDOUT: (e) => `timed out connecting${where(e) ? ` to ${where(e)}` : ""}`,
  ENOTFOUND: (e) => `host not found: ${where(e)}: check the address and the network`,
  EAI_AGAIN: (e) => `could not resolve ${where(e)} (DNS failed for now): check the network`,
  EHOSTUNREACH: (e) => `host unreachable: ${where(e)}`,
  ENETUNREACH: (e) => `network unreachable${where(e) ? ` for ${where(e)}` : ""}`,
};

/** Codes of a connection that failed: refused, reset, timed out, no route, no such host (yet). */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/** Codes of a file system that refused a path or a write, or failed. */
const FILE_SYSTEM_CODES = new Set(["ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EIO", "EISDIR", "ENOTDIR", "ENOENT", "EEXIST"]);

export type SystemErrorKind = "network" | "file-system";

/** The operating-system code of an error, or of the error it wraps (fetch and the AWS SDK wrap the socket's). */
export function systemCode(error: unknown): string | undefined {
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as SystemError).code;
    if (typeof code === "string" && (NETWORK_CODES.has(code) || FILE_SYSTEM_CODES.has(code))) return code;
  }
  return undefined;
}

/** Whether an error is a connection failing (worth retrying) or a file system refusing; undefined for anything else. */
export function systemErrorKind(error: unknown): SystemErrorKind | undefined {
  const code = systemCode(error);
  if (code === undefined) return undefined;
  return NETWORK_CODES.has(code) ? "network" : "file-system";
}

/** Library errors known by name (node-llama-cpp's model loader among them). */
const BY_NAME: Record<string, (e: Error) => string> = {
  InvalidGgufMagicError: () => "the model file is not a GGUF file (its first bytes are not GGUF): name a .gguf model",
};

/** One line for an operating-system or known library error; undefined when the error is none of those. */
export function describeSystemError(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const e = error as SystemError;
  // node-llama-cpp's error classes leave `name` as "Error": their class is the name.
  const byName = BY_NAME[e.name] ?? BY_NAME[e.constructor.name];
  if (byName) return byName(e);
  const byCode = e.code === undefined ? undefined : BY_CODE[e.code];
  if (byCode) return byCode(e);
  // fetch() wraps the socket's error: describe the cause.
  if (e.cause instanceof Error && e.cause !== error) return describeSystemError(e.cause);
  return undefined;
}
