/** S3 outputs, streamed by multipart upload (lib-storage `Upload`, 5 MiB parts, parts discarded on error). */
import { PassThrough } from "node:stream";
import type { S3Client } from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { SourceError } from "../input/source.js";
import { parseS3, s3Client } from "../s3.js";
import type { OutputTarget } from "./outputs.js";

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
