/**
 * vitest's global setup for the real S3 store: one Ceph RGW cluster per
 * vitest run (test/support/ceph-rgw.ts), shared by every test file that
 * asks for it (`realS3()` in rgw.ts), started the first time one does (a
 * run of other files starts nothing), and stopped when the run ends.
 *
 * The test files run in worker processes; the cluster belongs to this, the
 * main process, so it outlives any one file. They meet in a folder this
 * setup provides (`inject("rgwDir")`): a worker writes `wanted`, this process
 * starts the cluster and writes `ready.json` (or `failed`, with the daemons'
 * logs). If vitest is killed, the cluster's watchdog ends the daemons.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { CEPH_PACKAGES, CephDaemons, logTails, missingCephPrograms, startCephRgw } from "./ceph-rgw.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** Where the test files and this setup meet about the Ceph RGW cluster. */
    rgwDir: string;
  }
}

export function setup(project: TestProject): () => Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "te-rgw-"));
  project.provide("rgwDir", dir);
  const missing = missingCephPrograms();
  const daemons = new CephDaemons(dir);
  let starting: Promise<void> | undefined;
  const poll = setInterval(() => {
    if (starting || !existsSync(join(dir, "wanted"))) return;
    if (missing.length > 0) {
      process.stderr.write(
        `\n*** No Ceph RGW (${missing.join(", ")} not found): the S3 tests against a real store are SKIPPED (apt-get install -y ${CEPH_PACKAGES}) ***\n\n`,
      );
      starting = Promise.resolve();
      return;
    }
    starting = startCephRgw(dir, daemons).then(
      (rgw) => {
        writeFileSync(join(dir, "ready.json"), JSON.stringify(rgw));
        process.stderr.write(`Ceph RGW for the S3 tests: ${rgw.endpoint}, started in ${rgw.startedIn.toFixed(1)} s\n`);
      },
      (error: unknown) => writeFileSync(join(dir, "failed"), `${error instanceof Error ? error.message : String(error)}\n${logTails(dir)}`),
    );
  }, 100);
  poll.unref();
  return async () => {
    clearInterval(poll);
    await starting;
    await daemons.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
