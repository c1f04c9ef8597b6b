/**
 * Files and objects read by byte ranges (what a format whose reader seeks,
 * Parquet, is given): a local file through one handle, an S3 object by
 * ranged GETs, each pinned to the version first seen.
 */
import { open } from "node:fs/promises";
import type { S3Client } from "@aws-sdk/client-s3";
import { assertPathUnchanged, assertSameFile, type FileIdentity, identityOf } from "./file-identity.js";
import type { RangedFile } from "./format.js";
import { getPinned, type ObjectVersion, storageCall } from "./s3.js";

/**
 * A local file read by ranges through one file handle, all of the file
 * `seen` describes (by default, the one opened): checked when it is opened,
 * after every range and at the end (`InputChangedError` when it was replaced
 * or modified meanwhile).
 */
export async function localRanges(path: string, seen?: FileIdentity): Promise<RangedFile> {
  const handle = await open(path, "r");
  const opened = identityOf(await handle.stat());
  const was = seen ?? opened;
  const unchanged = async () => assertSameFile(path, was, identityOf(await handle.stat()));
  try {
    assertSameFile(path, was, opened);
  } catch (error) {
    await handle.close();
    throw error;
  }
  const size = was.size;
  return {
    byteLength: size,
    slice: async (start, end = size) => {
      const bytes = new Uint8Array(end - start);
      const { bytesRead } = await handle.read(bytes, 0, bytes.length, start);
      await unchanged();
      return bytesRead === bytes.length ? bytes.buffer : bytes.buffer.slice(0, bytesRead);
    },
    close: () => handle.close(),
    verify: async () => assertPathUnchanged(path, was),
  };
}

/** An S3 object read by ranged GETs, each of the version first seen (`InputChangedError` once it is replaced). */
export function s3Ranges(client: S3Client, location: string, pinned: ObjectVersion): RangedFile {
  const size = pinned.size;
  return {
    byteLength: size,
    slice: async (start, end = size) => {
      if (end <= start) return new ArrayBuffer(0);
      // The body is read inside the retried call: a reset mid-body refetches the range.
      const bytes = await storageCall("reading", location, async (signal) => {
        const got = await getPinned(client, location, pinned, { from: start, to: end - 1 }, signal);
        return (await got.Body?.transformToByteArray()) ?? new Uint8Array(0);
      });
      return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer;
    },
    close: async () => undefined,
  };
}
