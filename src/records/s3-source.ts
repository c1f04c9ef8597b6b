/** S3 inputs: `s3://bucket/key` reads one object; `s3://bucket/prefix/` every object under the prefix in key order, as one stream of records. */
import { Readable } from "node:stream";
import type { S3Client } from "@aws-sdk/client-s3";
import { assertBucket, headObject, isMissingKey, keysUnder, type ListedObject, objectBytes, parseS3, s3Client } from "./s3.js";
import { InvocationError } from "../api/errors.js";
import { StorageError, SourceError } from "../api/verdict.js";
import { inputFormat } from "./formats.js";
import { s3Ranges } from "./ranges.js";
import type { Source, SourceItem } from "./source.js";
import { itemsOf, type SourceOptions } from "./sources.js";

/** The objects `location` names, as the listing or HEAD saw them: one key, or every data object under a prefix. */
async function objectsAt(client: S3Client, location: string, onNote?: (message: string, keys: string[]) => void): Promise<ListedObject[]> {
  const { bucket, key } = parseS3(location);
  try {
    if (key !== "" && !key.endsWith("/")) {
      const head = await headObject(client, bucket, key);
      return [{ key, size: head.ContentLength ?? 0, etag: head.ETag, versionId: head.VersionId }];
    }
    const listed = await keysUnder(client, bucket, key);
    const markers = listed.markers;
    if (markers.length > 0)
      onNote?.(
        `skipped ${markers.length} marker object${markers.length > 1 ? "s" : ""} under ${location} (names starting with _ or ., or ending in .crc)`,
        markers,
      );
    if (listed.keys.length === 0)
      throw new SourceError(`no data objects under ${location}${markers.length ? ` (only markers: ${markers.join(", ")})` : ""}`, { absent: true });
    return listed.keys;
  } catch (error) {
    // A store that is down (or refuses us) is not a bad invocation: the run stops resumable, to be rerun once it is back.
    if (error instanceof InvocationError || error instanceof StorageError) throw error;
    const e = error as Error & { name: string };
    const missing = isMissingKey(e);
    // A HEAD says "not found" for a missing bucket too: that is a setting to fix (exit 2), not an input absent tonight.
    if (missing) await assertBucket(client, bucket, location);
    throw new SourceError(`cannot read ${location}: ${missing ? "no such key" : e.message}`, { absent: missing });
  }
}

/**
 * Opens `s3://bucket/key` or every object under `s3://bucket/prefix/`. Each
 * object's format is the one `format` names when given, else the one its key
 * implies (a Spark folder of `part-*.parquet` needs no flag). Objects of a
 * format read by ranges (Parquet) are read by ranged GETs, a row group at a
 * time. Every read of an object is of the
 * version its HEAD (or the listing) showed: one replaced while it is read
 * ends the read with `InputChangedError`.
 */
export async function openS3Source(
  location: string,
  format: string | undefined,
  options: SourceOptions & { client?: S3Client; onNote?: (message: string, keys: string[]) => void } = {},
): Promise<Source> {
  const client = options.client ?? s3Client();
  const { bucket } = parseS3(location);
  const objects = await objectsAt(client, location, options.onNote);
  const counter = { bytes: 0 };
  const total = objects.reduce((sum, o) => sum + o.size, 0);
  async function* items(): AsyncGenerator<SourceItem> {
    let seq = 0;
    for (const object of objects) {
      // An empty object is an empty input; its body stream may never signal readable, so it is not fetched.
      if (object.size === 0) continue;
      const name = `s3://${bucket}/${object.key}`;
      const kind = inputFormat(object.key, format);
      let body: Readable | undefined;
      let records: AsyncGenerator<SourceItem>;
      if ("ranged" in kind.read) records = kind.read.ranged(async () => s3Ranges(client, name, object), name, seq, counter, options.fields);
      else {
        body = Readable.from(objectBytes(client, bucket, object.key, object), { objectMode: false });
        body.on("data", (chunk: Buffer) => (counter.bytes += chunk.length));
        records = itemsOf(body, kind, name, seq, options.reading);
      }
      try {
        for await (const item of records) {
          seq = item.seq + 1;
          yield item;
        }
      } finally {
        // An unconsumed body holds its socket: the client hangs after 50.
        body?.destroy();
      }
    }
  }
  return { name: location, items: items(), progress: () => ({ bytes: counter.bytes, total }) };
}
