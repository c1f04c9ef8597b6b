/**
 * What kind of file typed-eval is given, told from its first bytes: a run's
 * answers, errors, journal or usage summary, a calibration, a report's or an
 * assessment's JSON, a Label Studio export, a job file. A command handed a
 * file of another kind than it reads (`report` on a run's errors file, `run`
 * on a usage summary) refuses it before any work, naming both kinds, instead
 * of reading it as empty or failing every row. A file of no kind known here
 * (anyone's records, gold labels) is not refused.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { InvocationError } from "../api/errors.js";
import { formatOfName } from "./formats.js";
import { isS3 } from "./s3.js";

/** A file whose name says a format read by byte ranges (Parquet): binary, no first line to judge. */
const binaryByName = (path: string) => {
  const file = formatOfName(path);
  return file !== undefined && "ranged" in file.format.read;
};

/** The kinds of file typed-eval writes or reads, told apart by their content. */
export type FileKind = "answers" | "errors" | "journal" | "usage summary" | "calibration" | "report" | "assessment" | "Label Studio export" | "job file";

/** Each kind as the one line of a refusal names it. */
const DESCRIBED: Record<FileKind, string> = {
  answers: "a run's answers",
  errors: "a run's errors file (one line per failed record)",
  journal: "a run's journal",
  "usage summary": "a run's usage summary",
  calibration: "a calibration file (typed-eval calibrate)",
  report: "a report's JSON (report --json)",
  assessment: "an assessment's JSON (assess --json)",
  "Label Studio export": "a Label Studio export",
  "job file": "a job file",
};

/** The `kind` marker of typed-eval's JSON documents. */
const MARKED: Record<string, FileKind> = {
  "typed-eval.usage": "usage summary",
  "typed-eval.calibration": "calibration",
  "typed-eval.report": "report",
  "typed-eval.assessment": "assessment",
};

/** The fields of a row of a run's errors file (runner/output/outputs.ts writes exactly these). */
const ERROR_FIELDS = new Set(["line", "source", "id", "status", "type", "message"]);

/** The journal's entry kinds (runner/state/journal.ts). */
const JOURNAL_ENTRIES = new Set(["answer", "error", "run", "keep", "input"]);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The kind a decoded first record (or whole JSON document) shows, if any. */
export function kindOfRecord(record: unknown): FileKind | undefined {
  if (Array.isArray(record)) return record.length > 0 && record.every((t) => isObject(t) && isObject(t["data"])) ? "Label Studio export" : undefined;
  if (!isObject(record)) return undefined;
  const marked = typeof record["kind"] === "string" ? MARKED[record["kind"]] : undefined;
  if (marked) return marked;
  const keys = Object.keys(record);
  if (typeof record["k"] === "string" && JOURNAL_ENTRIES.has(record["k"]) && keys.length >= 2) return "journal";
  if (keys.length === ERROR_FIELDS.size && keys.every((k) => ERROR_FIELDS.has(k))) return "errors";
  const answers = record["answers"];
  if (isObject(answers) && Object.values(answers).some((a) => isObject(a) && typeof a["type"] === "string") && "id" in record) return "answers";
  if (isObject(record["questions"]) && keys.every((k) => JOB_FIELDS.has(k))) return "job file";
  return undefined;
}

/** A job file's fields (records/job.ts): a record holding only these and questions is a job, not data. */
const JOB_FIELDS = new Set(["description", "model", "state", "id", "keep", "calibration", "review_below", "questions"]);

/** How much of a file is read to tell its kind: a first line, or a whole small JSON document. */
const HEAD_BYTES = 64 * 1024;

/**
 * The kind of a local file, from its first 64 KiB: its first line as a JSON
 * record, else the whole head as one JSON document (a pretty-printed summary
 * or job), else the `kind` marker that opens typed-eval's documents.
 * Undefined for S3, compressed and Parquet files, files that are not there,
 * and anything of no kind known here.
 */
export function kindOfFile(path: string): FileKind | undefined {
  if (isS3(path) || /\.gz$/i.test(path) || binaryByName(path)) return undefined;
  const head = readHead(path);
  if (head === undefined) return undefined;
  const text = head.replace(/^\uFEFF/, "").trimStart();
  if (!text.startsWith("{") && !text.startsWith("[")) return undefined;
  const firstLine = text.split("\n", 1)[0] ?? "";
  for (const candidate of [firstLine, text]) {
    try {
      return kindOfRecord(JSON.parse(candidate));
    } catch {
      // Not one JSON value: a document longer than the head, or a line of a multi-line one.
    }
  }
  const marker = /^\{\s*"kind"\s*:\s*"(typed-eval\.[a-z]+)"/.exec(text)?.[1];
  if (marker && MARKED[marker]) return MARKED[marker];
  return text.startsWith("[") && /^\[\s*\{\s*"(id|data|annotations|predictions)"/.test(text) ? "Label Studio export" : undefined;
}

function readHead(path: string): string | undefined {
  // Only a regular file: a pipe would block here with no writer, or be consumed (`<(cat t.jsonl)`) before its reader.
  let fd: number;
  try {
    if (!statSync(path).isFile()) return undefined;
    fd = openSync(path, "r");
  } catch {
    // Absent or unreadable: the reader that follows says so in its own words.
    return undefined;
  }
  try {
    const buffer = Buffer.alloc(HEAD_BYTES);
    const n = readSync(fd, buffer, 0, HEAD_BYTES, 0);
    return buffer.toString("utf8", 0, n);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** A file of another kind than the command reads: a mistake in the invocation (exit 2), naming both kinds. */
export class WrongKindError extends InvocationError {
  override name = "WrongKindError";
  constructor(
    readonly path: string,
    readonly found: FileKind,
    expected: string,
  ) {
    super(`${path} is ${DESCRIBED[found]}, not ${expected}: pass ${expected} instead`);
  }
}

/**
 * Refuses a local file whose content shows a kind other than those
 * `accepted` (`expected` names what the command reads, for the message).
 * A file of no kind known here passes: the reader judges it.
 */
export function refuseOtherKinds(path: string, accepted: readonly FileKind[], expected: string): void {
  const found = kindOfFile(path);
  if (found !== undefined && !accepted.includes(found)) throw new WrongKindError(path, found, expected);
}
