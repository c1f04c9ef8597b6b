/**
 * The files a run writes beside its output (`<output>.errors.jsonl`,
 * `<output>.usage.json`), read back by the commands that read the output:
 * on disk or in S3 alike, so a gate given `s3://bucket/answers.jsonl` sees
 * what it sees beside a local copy of the same files.
 */
import { createReadStream, openSync, statSync } from "node:fs";
import { Readable } from "node:stream";
import { headObject, isMissingKey, isS3, objectBytes, parseS3, s3Client } from "./s3.js";

/** What a run writes beside its output, by the suffix it adds to the output's name. */
export const COMPANION_SUFFIX = { errors: ".errors.jsonl", usage: ".usage.json" } as const;

/** Where a run wrote its `kind` file beside `output` (a path or `s3://bucket/key`). */
export function besideOutput(output: string, kind: keyof typeof COMPANION_SUFFIX): string {
  return `${output}${COMPANION_SUFFIX[kind]}`;
}

/**
 * A file on disk or an `s3://bucket/key` object as a byte stream; undefined
 * when it is not there (no such file or key); a file that cannot be opened
 * throws its system error (EACCES, EISDIR). An S3 object is read as the
 * version its HEAD showed; a store that stays down past the storage retry
 * window is a `StorageError` (exit 9), a refusal of our credentials exit 2.
 */
export async function openCompanion(location: string): Promise<Readable | undefined> {
  if (!isS3(location)) {
    const stat = statSync(location, { throwIfNoEntry: false });
    if (!stat) return undefined;
    if (stat.isDirectory()) throw Object.assign(new Error("it is a folder, not a file"), { code: "EISDIR" });
    // Opened here, so a file that cannot be read (no permission) throws now, not in the middle of its reader.
    return createReadStream("", { fd: openSync(location, "r") });
  }
  const { bucket, key } = parseS3(location);
  if (!key || key.endsWith("/")) return undefined;
  const client = s3Client();
  try {
    const head = await headObject(client, bucket, key);
    return Readable.from(objectBytes(client, bucket, key, { size: head.ContentLength ?? 0, etag: head.ETag, versionId: head.VersionId }), {
      objectMode: false,
    });
  } catch (error) {
    if (isMissingKey(error)) return undefined;
    throw error;
  }
}

/** A companion file's whole text (it is small: a usage summary), or undefined when it is not there. */
export async function readCompanionText(location: string): Promise<string | undefined> {
  const stream = await openCompanion(location);
  if (!stream) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}
