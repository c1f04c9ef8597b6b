/**
 * S3 outputs. The output is assembled on local disk first (under
 * `.typed-eval/outputs/<bucket>/<key>`), then uploaded (lib-storage `Upload`,
 * 5 MiB parts, parts discarded on error) with the storage retries. An upload
 * that still fails keeps the assembled file and says where: nothing the model
 * answered is lost, and the rerun writes and uploads it from the journal
 * without asking the model again. A stop during the upload abandons it
 * (nothing made final after a stop), keeping the staged file.
 */
import { createReadStream, mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { env } from "../../api/env.js";
import { PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { s3Client, s3Object, storageCall } from "../../records/s3.js";
import { StorageError } from "../../api/verdict.js";
import { partialFile, type OutputTarget } from "./targets.js";

/** Multipart upload's part size; a smaller output goes up in one PUT. */
const PART_BYTES = 5 * 1024 * 1024;

/** Where S3 outputs are assembled before their upload ($TYPED_EVAL_STAGING, default .typed-eval/outputs). */
function stagingDir(): string {
  return env("TYPED_EVAL_STAGING");
}

/** Where the output at an S3 location is assembled before its upload: checked before the first request, as every place a run writes. */
export function stagedPath(location: string): string {
  const { bucket, key } = s3Object(location, "the output");
  return join(stagingDir(), bucket, key);
}

/** An output assembled locally (every write checked, as a local file's), then uploaded to S3; kept locally, named in the error, if the upload fails. */
export function s3Target(location: string, client: S3Client = s3Client()): OutputTarget {
  const { bucket, key } = s3Object(location, "the output");
  return {
    describe: location,
    open: () => {
      const staged = stagedPath(location);
      mkdirSync(dirname(staged), { recursive: true });
      const send = (cut: AbortSignal): Promise<unknown> => {
        // One PUT, sent here rather than by Upload: Upload cannot cut its single request short, and a stop must.
        if (statSync(staged).size < PART_BYTES)
          return client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: readFileSync(staged) }), { abortSignal: cut });
        const parts = new Upload({
          client,
          params: { Bucket: bucket, Key: key, Body: createReadStream(staged) },
          leavePartsOnError: false,
          partSize: PART_BYTES,
        });
        cut.addEventListener("abort", () => void parts.abort().catch(() => undefined), { once: true });
        return parts.done();
      };
      // Cut short when the run's ending budget runs out, or by a stop: the parts are discarded, the staged file kept.
      const upload = async (signal: AbortSignal | undefined, stop: AbortSignal | undefined) => {
        const stopped = () => new StorageError(`uploading to ${location}: the run was stopped before the upload finished`, location);
        if (stop?.aborted) throw stopped();
        try {
          return await send(AbortSignal.any([signal, stop].filter((one): one is AbortSignal => one !== undefined)));
        } catch (error) {
          if (stop?.aborted) throw stopped();
          throw error;
        }
      };
      return partialFile(staged, async (stop) => {
        try {
          await storageCall("uploading to", location, (signal) => upload(signal, stop));
        } catch (error) {
          const why = error instanceof StorageError ? error.message : `uploading to ${location}: ${(error as Error).message}`;
          throw new StorageError(`${why}; the output is kept at ${staged}, and rerunning the same command uploads it`, location, { cause: error });
        }
        rmSync(staged, { force: true });
      });
    },
  };
}
