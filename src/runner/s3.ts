/**
 * S3 inputs and outputs. `s3://bucket/key` reads one object;
 * `s3://bucket/prefix/` reads every object under the prefix in key order,
 * as one stream of records. Outputs are streamed by multipart upload
 * (lib-storage `Upload`, 5 MiB parts, parts discarded on error).
 *
 * The client follows the AWS SDK's own configuration (environment, profile);
 * `AWS_ENDPOINT_URL_S3` (or `AWS_ENDPOINT_URL`) points it at any
 * S3-compatible server, with path-style addressing.
 */
import { PassThrough, type Readable } from "node:stream";
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import type { OutputTarget } from "./outputs.js";
import { s3Ranges, parquetItems } from "./parquet.js";
import { formatOf, itemsOf, SourceError, type InputFormat, type Source, type SourceItem, type SourceOptions } from "./sources.js";

export function isS3(location: string): boolean {
  return location.startsWith("s3://");
}

export function parseS3(location: string): { bucket: string; key: string } {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(location);
  if (!match?.[1]) throw new SourceError(`not an S3 location: ${location} (expected s3://bucket/key)`);
  return { bucket: match[1], key: match[2] ?? "" };
}

let shared: S3Client | undefined;

/** The S3 client, configured from the environment. */
export function s3Client(): S3Client {
  const endpoint = process.env["AWS_ENDPOINT_URL_S3"] ?? process.env["AWS_ENDPOINT_URL"];
  shared ??= new S3Client({
    ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
    region: process.env["AWS_REGION"] ?? process.env["AWS_DEFAULT_REGION"] ?? "us-east-1",
  });
  return shared;
}

/**
 * Whether a key under a prefix is a marker, not data, by the rule Hadoop-style
 * readers use: a name starting with "_" or "." (`_SUCCESS`, `_committed_...`,
 * `.part-0.crc`) or ending in ".crc". Spark and Hadoop write them into every
 * output folder.
 */
export function isMarker(key: string): boolean {
  const name = key.slice(key.lastIndexOf("/") + 1);
  return name.startsWith("_") || name.startsWith(".") || name.endsWith(".crc");
}

/** Whether an S3 error says the key (or object) is not there. */
export function isMissingKey(error: unknown): boolean {
  const name = (error as { name?: string }).name;
  return name === "NotFound" || name === "NoSuchKey";
}

/** Every object under a prefix, in key order, with the marker objects apart (all pages of the listing). */
export async function keysUnder(client: S3Client, bucket: string, prefix: string): Promise<{ keys: { key: string; size: number }[]; markers: string[] }> {
  const keys: { key: string; size: number }[] = [];
  const markers: string[] = [];
  let token: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) {
      if (!o.Key || o.Key.endsWith("/")) continue;
      if (isMarker(o.Key.slice(prefix.length))) markers.push(o.Key);
      else keys.push({ key: o.Key, size: o.Size ?? 0 });
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return { keys: keys.sort((a, b) => (a.key < b.key ? -1 : 1)), markers };
}

/**
 * Opens `s3://bucket/key` or every object under `s3://bucket/prefix/`. Each
 * object's format is `format` when given, else the one its key implies (a
 * Spark folder of `part-*.parquet` needs no flag). Parquet objects are read
 * by ranged GETs, a row group at a time.
 */
export async function openS3Source(
  location: string,
  format: InputFormat | undefined,
  options: SourceOptions & { client?: S3Client; onNote?: (message: string, keys: string[]) => void } = {},
): Promise<Source> {
  const client = options.client ?? s3Client();
  const onNote = options.onNote;
  const { bucket, key } = parseS3(location);
  let objects: { key: string; size: number }[];
  try {
    if (key === "" || key.endsWith("/")) {
      const listed = await keysUnder(client, bucket, key);
      objects = listed.keys;
      if (listed.markers.length > 0)
        onNote?.(
          `skipped ${listed.markers.length} marker object${listed.markers.length > 1 ? "s" : ""} under ${location} (names starting with _ or ., or ending in .crc)`,
          listed.markers,
        );
      if (objects.length === 0)
        throw new SourceError(`no data objects under ${location}${listed.markers.length ? ` (only markers: ${listed.markers.join(", ")})` : ""}`, {
          absent: true,
        });
    } else {
      const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      objects = [{ key, size: head.ContentLength ?? 0 }];
    }
  } catch (error) {
    if (error instanceof SourceError) throw error;
    const e = error as Error & { name: string };
    const missing = isMissingKey(e);
    throw new SourceError(`cannot read ${location}: ${missing ? "no such key" : e.message}`, { absent: missing });
  }
  const counter = { bytes: 0 };
  const total = objects.reduce((sum, o) => sum + o.size, 0);
  async function* items(): AsyncGenerator<SourceItem> {
    let seq = 0;
    for (const object of objects) {
      // An empty object is an empty input; its body stream may never signal readable, so it is not fetched.
      if (object.size === 0) continue;
      const name = `s3://${bucket}/${object.key}`;
      const kind = formatOf(object.key, format);
      let body: Readable | undefined;
      let records: AsyncGenerator<SourceItem>;
      if (kind === "parquet") records = parquetItems(async () => s3Ranges(client, bucket, object.key, object.size), name, seq, counter, options.fields);
      else {
        body = (await client.send(new GetObjectCommand({ Bucket: bucket, Key: object.key }))).Body as Readable;
        body.on("data", (chunk: Buffer) => (counter.bytes += chunk.length));
        records = itemsOf(body, kind, name, seq);
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

/** An output streamed to S3 by multipart upload; nothing is left behind if it fails. */
export function s3Target(location: string, client: S3Client = s3Client()): OutputTarget {
  const { bucket, key } = parseS3(location);
  if (!key || key.endsWith("/")) throw new SourceError(`an S3 output needs a key, not a prefix: ${location}`);
  return {
    describe: location,
    open: () => {
      const stream = new PassThrough();
      const upload = new Upload({ client, params: { Bucket: bucket, Key: key, Body: stream }, leavePartsOnError: false, partSize: 5 * 1024 * 1024 });
      const done = upload.done();
      done.catch(() => undefined);
      return {
        stream,
        commit: async () => {
          stream.end();
          await done;
        },
        abort: async () => {
          await upload.abort().catch(() => undefined);
          stream.destroy();
        },
      };
    },
  };
}
