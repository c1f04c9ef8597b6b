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
import { ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { SourceError } from "./input/source.js";

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
