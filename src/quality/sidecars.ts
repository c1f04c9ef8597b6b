/**
 * What a run wrote beside its answers, as the quality commands read it: the
 * errors file (failed rows by reason) and the usage summary (model, usage,
 * cost, calibration). Read beside the answers on disk or in S3 alike
 * (records/companions.ts), or from where a flag (`--errors`, `--usage`)
 * names them. One not beside the answers leaves out what it would have
 * said; one a flag names must be there and be what it says: else exit 2,
 * one line naming it, before the answers are read.
 */
import { createInterface } from "node:readline";
import { besideOutput, openCompanion, readCompanionText } from "../records/companions.js";
import { isS3 } from "../records/s3.js";
import { isSummary, type UsageSummary } from "../records/usage.js";
import { QualityInputError } from "./answers.js";

/** Failed rows as the errors file lists them. */
export interface ErrorsTally {
  total: number;
  by_type: Record<string, number>;
  examples: { line: number; id: string; type: string; message: string }[];
}

/** Where a sidecar is read from: `flag`'s value when the user named one, else beside the answers. */
export interface SidecarPlace {
  location: string;
  /** The flag that named it (`--usage`): it must then be there and be a file of its kind. */
  flag?: string | undefined;
}

/** The `kind` file beside `answers`, unless `named` (a flag's value) says where it is. */
export function sidecarPlace(answers: string, kind: "errors" | "usage", named?: string): SidecarPlace {
  return named !== undefined ? { location: named, flag: `--${kind}` } : { location: besideOutput(answers, kind) };
}

function unreadable(place: SidecarPlace, why: string): QualityInputError {
  return new QualityInputError(`cannot read ${place.flag} ${place.location}: ${why}`);
}

/** Opens a sidecar; undefined when it is not there and no flag named it. A local file that cannot be opened is one line, exit 2. */
async function open<T>(place: SidecarPlace, read: (location: string) => Promise<T | undefined>): Promise<T | undefined> {
  let got: T | undefined;
  try {
    got = await read(place.location);
  } catch (error) {
    // A file on disk that is there but cannot be read (a folder, no permission): S3's failures carry their own verdicts.
    if (isS3(place.location) || typeof (error as NodeJS.ErrnoException).code !== "string") throw error;
    throw new QualityInputError(`cannot read ${place.flag ? `${place.flag} ` : ""}${place.location}: ${(error as Error).message}`);
  }
  if (got === undefined && place.flag) throw unreadable(place, `no such ${isS3(place.location) ? "key" : "file"}`);
  return got;
}

/** The usage summary at `place`; undefined when none is beside the answers, or the file there is not one. */
export async function readUsage(place: SidecarPlace): Promise<UsageSummary | undefined> {
  const text = await open(place, readCompanionText);
  if (text === undefined) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    if (place.flag) throw unreadable(place, `not JSON (${(error as Error).message}): name a run's <output>.usage.json`);
    // An unreadable usage file beside the answers leaves what it would have said out; the labels are what the report is for.
    return undefined;
  }
  if (isSummary(json)) return json;
  if (place.flag) throw unreadable(place, "not a typed-eval usage summary: name a run's <output>.usage.json");
  return undefined;
}

/** The errors file at `place`, tallied by type; undefined when none is beside the answers. */
export async function readErrors(place: SidecarPlace): Promise<ErrorsTally | undefined> {
  const stream = await open(place, openCompanion);
  if (!stream) return undefined;
  const out: ErrorsTally = { total: 0, by_type: {}, examples: [] };
  let n = 0;
  for await (const line of createInterface({ input: stream, crlfDelay: Infinity })) {
    n++;
    if (!line) continue;
    let e: { line: number; id: string; type: unknown; message: string } | undefined;
    try {
      e = JSON.parse(line) as typeof e;
    } catch {
      // Not an errors line: skipped (checked below when named).
    }
    if (typeof e?.type !== "string") {
      if (place.flag) {
        stream.destroy();
        throw unreadable(place, `line ${n} is not a failed record (no "type"): name a run's <output>.errors.jsonl`);
      }
      continue;
    }
    out.total++;
    out.by_type[e.type] = (out.by_type[e.type] ?? 0) + 1;
    if (out.examples.length < 20) out.examples.push({ line: e.line, id: e.id, type: e.type, message: e.message });
  }
  return out;
}

/** Rows a run failed: its errors file, else its usage summary; undefined when neither is there. */
export async function failedRows(errors: SidecarPlace, usage: UsageSummary | undefined): Promise<number | undefined> {
  return (await readErrors(errors))?.total ?? usage?.records.failed;
}
