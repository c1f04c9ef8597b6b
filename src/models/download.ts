/**
 * Model downloads: streamed to a `.partial` file while hashing, resumed with
 * an HTTP Range request after an interruption, and renamed into place only
 * once the SHA-256 matches the registry. A file at the final path is verified.
 */
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream, existsSync, mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ModelEntry } from "./registry.js";
import { InvocationError, UpstreamUnavailableError } from "../api/errors.js";
import { systemErrorKind } from "../api/system-errors.js";
import { env } from "../api/env.js";

export type Progress = (received: number, total: number | undefined) => void;

/** The download URL of a source URI; `hf://owner/repo/file` goes to `HF_ENDPOINT` (default huggingface.co). */
export function downloadUrl(uri: string): string {
  const hf = /^hf:\/\/([^/]+)\/([^/]+)\/(.+)$/.exec(uri);
  if (!hf) return uri;
  const endpoint = env("HF_ENDPOINT").replace(/\/$/, "");
  return `${endpoint}/${hf[1]}/${hf[2]}/resolve/main/${hf[3]}`;
}

export class DownloadError extends InvocationError {
  override name = "DownloadError";
}

/**
 * The download host did not answer (refused, unreachable, reset, 5xx): not
 * the invocation's fault, so not exit 2. It is the resumable "endpoint
 * unavailable" verdict (exit 3) a scheduler retries; the partial file is
 * kept and the next pull resumes it.
 */
export class DownloadUnavailableError extends UpstreamUnavailableError {
  override name = "DownloadUnavailableError";
}

const OFFLINE_HINT = (dest: string) =>
  `Offline? Copy the file to ${dest}, or pass --model-path (or TYPED_EVAL_MODEL_PATH; make eval MODEL_PATH=...) to a local GGUF. Behind a mirror? Set HF_ENDPOINT.`;

async function hashFile(path: string, hash = createHash("sha256")): Promise<ReturnType<typeof createHash>> {
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash;
}

/** SHA-256 of a whole file, hex. */
export async function sha256File(path: string): Promise<string> {
  return (await hashFile(path)).digest("hex");
}

/**
 * SHA-256 of a model file, remembered in `<modelsDir>/file-hashes.json` by
 * real path, size and modification time: a multi-gigabyte GGUF is hashed
 * once, not on every run. A cache that cannot be read or written is ignored.
 */
export async function cachedSha256(path: string, modelsDir: string): Promise<string> {
  const { realpathSync, statSync, readFileSync, writeFileSync, mkdirSync, renameSync } = await import("node:fs");
  const { join } = await import("node:path");
  const stat = statSync(path);
  const key = `${realpathSync(path)}|${stat.size}|${Math.trunc(stat.mtimeMs)}`;
  const cacheFile = join(modelsDir, "file-hashes.json");
  let cache: Record<string, string> = {};
  try {
    cache = JSON.parse(readFileSync(cacheFile, "utf8")) as Record<string, string>;
  } catch {
    cache = {};
  }
  const known = cache[key];
  if (typeof known === "string" && /^[0-9a-f]{64}$/.test(known)) return known;
  const digest = await sha256File(path);
  try {
    mkdirSync(modelsDir, { recursive: true });
    cache[key] = digest;
    writeFileSync(`${cacheFile}.partial`, JSON.stringify(cache, null, 1));
    renameSync(`${cacheFile}.partial`, cacheFile);
  } catch {
    // A read-only models folder: hash again next time.
  }
  return digest;
}

export interface PullOptions {
  onProgress?: Progress;
  signal?: AbortSignal;
}

/**
 * Downloads `entry`'s weights to `dest` unless a verified file is already
 * there. Returns whether anything was downloaded.
 */
export async function pullModel(entry: ModelEntry, dest: string, options: PullOptions = {}): Promise<boolean> {
  const source = entry.source;
  if (!source) throw new DownloadError(`model ${entry.name} has no source to download from; it uses a local path`);
  if (existsSync(dest)) return false;
  mkdirSync(dirname(dest), { recursive: true });
  const partial = `${dest}.partial`;
  const url = downloadUrl(source.uri);
  let have = existsSync(partial) ? statSync(partial).size : 0;
  const headers: Record<string, string> = have > 0 ? { range: `bytes=${have}-` } : {};
  let response: Response;
  try {
    response = await fetch(url, { headers, redirect: "follow", ...(options.signal ? { signal: options.signal } : {}) });
  } catch (error) {
    const why = (error as Error).cause instanceof Error ? ((error as Error).cause as Error).message : (error as Error).message;
    throw new DownloadUnavailableError(`cannot reach ${url}: ${why}. Rerun once it answers. ${OFFLINE_HINT(dest)}`, { cause: error, unreachable: true });
  }
  if (response.status === 416 || (have > 0 && response.status === 200)) {
    // The server ignored or refused the range: start over.
    rmSync(partial, { force: true });
    have = 0;
    if (response.status === 416) return pullModel(entry, dest, options);
  }
  if (response.status >= 500 || response.status === 408 || response.status === 429) {
    throw new DownloadUnavailableError(`download of ${url} failed: HTTP ${response.status} ${response.statusText}; rerun later. ${OFFLINE_HINT(dest)}`);
  }
  if (!response.ok || !response.body) {
    throw new DownloadError(`download of ${url} failed: HTTP ${response.status} ${response.statusText}`);
  }
  const hash = have > 0 ? await hashFile(partial) : createHash("sha256");
  const length = Number(response.headers.get("content-length") ?? NaN);
  const total = source.size ?? (Number.isFinite(length) ? have + length : undefined);
  let received = have;
  options.onProgress?.(received, total);
  const body = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
  body.on("data", (chunk: Buffer) => {
    hash.update(chunk);
    received += chunk.length;
    options.onProgress?.(received, total);
  });
  try {
    await pipeline(body, createWriteStream(partial, { flags: have > 0 ? "a" : "w" }));
  } catch (error) {
    // The connection dropped mid-file: what arrived is kept, and the next pull resumes from it.
    if (systemErrorKind(error) === "network") {
      throw new DownloadUnavailableError(`the download of ${url} was cut at ${received} bytes; rerun to resume it`, { cause: error });
    }
    throw error;
  }
  const digest = hash.digest("hex");
  if (digest !== source.sha256) {
    rmSync(partial, { force: true });
    throw new DownloadError(
      `checksum mismatch for ${url}: expected ${source.sha256}, got ${digest}. The partial file was deleted; run the pull again, and if it repeats the upstream file changed: update the registry entry.`,
    );
  }
  renameSync(partial, dest);
  return true;
}
