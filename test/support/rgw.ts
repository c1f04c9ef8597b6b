/**
 * The real S3 store of the tests: Ceph RGW (Debian's radosgw), one cluster
 * per vitest run, started by the global setup (rgw-setup.ts) the first time
 * a test file asks for it here. Buckets are shared by the run's files: each
 * file uses names of its own.
 *
 * Without Ceph installed, `RGW_MISSING` names what is missing and the files
 * skip their real-store tests (`describe.skipIf`), said loudly by the setup
 * and by `make test`. A cluster that is installed but fails to start fails
 * the tests, with the daemons' logs.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { inject } from "vitest";
import { addCephUser, type CephRgw, missingCephPrograms } from "./ceph-rgw.js";

/** The Ceph programs not installed here: the real-store tests are skipped when any is. */
export const RGW_MISSING: string[] = missingCephPrograms();

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

/** The store as a test sees it. */
export interface RealS3 {
  /** `http://127.0.0.1:<port>`. */
  endpoint: string;
  /** A client of the store's user (path-style, retries off as the runner has them). */
  client: S3Client;
  /** What a run's environment needs to reach the store as its user. */
  env: { AWS_ENDPOINT_URL_S3: string; AWS_ACCESS_KEY_ID: string; AWS_SECRET_ACCESS_KEY: string; AWS_REGION: string };
  /** Creates a bucket of the store's user (already there is fine). */
  bucket(name: string): Promise<void>;
  /** Another user of the store, with no right to the first user's buckets. */
  user(uid: string): Promise<Credentials>;
  /** A client with other credentials (another user's, or wrong ones). */
  clientAs(credentials: Credentials): S3Client;
}

async function waitForCluster(dir: string, timeoutMs: number): Promise<CephRgw> {
  for (const deadline = Date.now() + timeoutMs; ; ) {
    if (existsSync(join(dir, "ready.json"))) return JSON.parse(readFileSync(join(dir, "ready.json"), "utf8")) as CephRgw;
    if (existsSync(join(dir, "failed"))) throw new Error(`Ceph RGW did not start: ${readFileSync(join(dir, "failed"), "utf8")}`);
    if (Date.now() > deadline) throw new Error(`Ceph RGW did not start within ${timeoutMs / 1000} s (its folder: ${dir})`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

let store: Promise<RealS3> | undefined;

/** The run's Ceph RGW, started on first use; the same store for every call in a file. */
export function realS3(timeoutMs = 120_000): Promise<RealS3> {
  store ??= (async () => {
    const dir = inject("rgwDir");
    if (!dir) throw new Error("no Ceph RGW folder: test/support/rgw-setup.ts is not among vitest's globalSetup");
    writeFileSync(join(dir, "wanted"), "");
    const rgw = await waitForCluster(dir, timeoutMs);
    const clientAs = (credentials: Credentials) =>
      new S3Client({ endpoint: rgw.endpoint, forcePathStyle: true, region: "us-east-1", credentials, maxAttempts: 1 });
    const client = clientAs(rgw);
    return {
      endpoint: rgw.endpoint,
      client,
      env: { AWS_ENDPOINT_URL_S3: rgw.endpoint, AWS_ACCESS_KEY_ID: rgw.accessKeyId, AWS_SECRET_ACCESS_KEY: rgw.secretAccessKey, AWS_REGION: "us-east-1" },
      bucket: async (name: string) => {
        try {
          await client.send(new CreateBucketCommand({ Bucket: name }));
        } catch (error) {
          if ((error as Error).name !== "BucketAlreadyOwnedByYou" && (error as Error).name !== "BucketAlreadyExists") throw error;
        }
      },
      user: (uid: string) => addCephUser(rgw.conf, uid),
      clientAs,
    };
  })();
  return store;
}
