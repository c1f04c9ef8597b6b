/**
 * The job files shipped with the package (`jobs/` at its root), by name:
 * `--job support-triage` runs the same on a checkout, on a worker with the
 * npm package and in the image, where no path to the file is the same.
 * A path that exists always wins; only a bare name is looked up here.
 */
import { existsSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";

/** The package's jobs folder: the same from src/records and dist/records. */
const JOBS = resolve(import.meta.dirname, "../../jobs");

/** The bundled jobs' names (their file names without `.json`); none when the folder cannot be read (it only feeds help texts and hints). */
export function bundledJobs(): string[] {
  let files: string[];
  try {
    files = readdirSync(JOBS);
  } catch {
    return [];
  }
  return files
    .filter((f) => f.endsWith(".json"))
    .map((f) => f.slice(0, -".json".length))
    .sort();
}

/** A bare name with no file of that name in the working directory: `support-triage` or `support-triage.json`. */
function bundledFile(value: string): string | undefined {
  if (existsSync(value) || !/^[\w.-]+$/.test(value)) return undefined;
  const file = join(JOBS, `${value.replace(/\.json$/, "")}.json`);
  return existsSync(file) ? file : undefined;
}

/** What `--job` names: the value when such a file exists (or it is not a bundled job's name), else the bundled job's path. */
export function jobPath(value: string): string {
  return bundledFile(value) ?? value;
}

/** Said after "cannot read job file X": which names would have worked. */
export function missingJobHint(value: string): string {
  if (existsSync(value)) return "";
  return `; --job also takes a bundled job's name: ${bundledJobs().join(", ")}`;
}
