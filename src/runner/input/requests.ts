/** From a record to a request: the state by field or dotted path, the id, kept fields, the shard. */
import { describeIssues } from "../../api/errors.js";
import { createHash } from "node:crypto";
import type { EvaluatorRequest } from "../../api/schema.js";
import { MAX_BODY_BYTES } from "../../api/limits.js";
import { validateEvaluatorRequest } from "../../api/validate.js";
import type { Job } from "../../records/job.js";
import { formatBytes } from "../../records/text.js";
import { valueAt, type SourceItem } from "../../records/source.js";
import { fnv1a, mixedHash } from "../../records/hash.js";
import { journaledValue } from "../../records/nonfinite.js";

/** The dotted paths a job reads from each record (state, id, kept fields); undefined when the whole record is the state. */
export function fieldsRead(job: Pick<Job, "state" | "id" | "keep">): string[] | undefined {
  if (job.state === undefined) return undefined;
  return [job.state, ...(job.id === undefined ? [] : [job.id]), ...(job.keep ?? [])];
}

export type Built = { ok: true; request: EvaluatorRequest; id: string; keep: Record<string, unknown> } | { ok: false; id: string; message: string };

/** Builds a record's request; a missing or unusable state is an error that names the field. */
export function buildRequest(job: Job, record: unknown, line: number): Built {
  let id = String(line);
  if (job.id !== undefined) {
    const value = valueAt(record, job.id);
    if (value === undefined || value === null || value === "") return { ok: false, id, message: `record has no id field "${job.id}"` };
    id = typeof value === "string" ? value : JSON.stringify(value);
  }
  let state = job.state === undefined ? record : valueAt(record, job.state);
  if (state === undefined) return { ok: false, id, message: `record has no state field "${job.state}"` };
  if (state === null) return { ok: false, id, message: `state field "${job.state ?? "(record)"}" is null` };
  const nothing = saysNothing(state);
  if (nothing) return { ok: false, id, message: `state field "${job.state ?? "(record)"}" ${nothing}: nothing to label, not sent` };
  // The API takes text, objects and arrays: numbers and booleans are sent as their text.
  if (typeof state === "number" || typeof state === "boolean") state = String(state);
  const keep = Object.fromEntries((job.keep ?? []).map((field) => [field, journaledValue(valueAt(record, field) ?? null)]));
  return { ok: true, id, keep, request: { state: state as EvaluatorRequest["state"], model: job.model, questions: job.questions } };
}

/**
 * Text that holds no state, by the documented rule (docs/runner.md, Inputs):
 * empty or blank, or the mark a spreadsheet or dataframe writes for a
 * missing value. Such a record fails as itself, never sent or paid.
 */
const MISSING_MARKS = /^(nan|none|null|n\/a|#n\/a|undefined)$/i;

/** Why a state says nothing (refused), or undefined. */
function saysNothing(state: unknown): string | undefined {
  if (typeof state !== "string") return undefined;
  if (state.trim() === "") return state === "" ? "is empty" : "is blank";
  if (MISSING_MARKS.test(state.trim())) return `is ${JSON.stringify(state)}, the mark of a missing value`;
  return undefined;
}

/** Whether a state is a bare number (42, "3.5"): sent as its text, but more often a wrong state field (an id, a count) than a state; the check warns. */
export function bareNumber(state: unknown): boolean {
  if (typeof state === "number") return true;
  return typeof state === "string" && state.trim() !== "" && Number.isFinite(Number(state.trim()));
}

/** A request's content as JSON: what its identity is hashed from, and within a few bytes the size of the body sent. */
function requestText(request: EvaluatorRequest): string {
  return JSON.stringify([request.model, request.state, request.questions]);
}

/**
 * A request's identity: identical requests (same state, model and questions)
 * to the same model identity (see `Evaluator.identity`) have the same hash.
 */
function requestHash(text: string, identity: string): string {
  return createHash("sha256").update(identity).update("\n").update(text).digest("hex");
}

export interface Shard {
  index: number;
  count: number;
}

/** Parses `i/n` (1 <= i <= n). */
export function parseShard(text: string): Shard {
  const match = /^(\d+)\/(\d+)$/.exec(text.trim());
  const index = Number(match?.[1]);
  const count = Number(match?.[2]);
  if (!match || count < 1 || index < 1 || index > count) throw new Error(`--shard must be i/n with 1 <= i <= n, got "${text}"`);
  return { index, count };
}

/** Whether a record belongs to a shard: FNV-1a of its key (id or line number) modulo the shard count. */
export function inShard(shard: Shard | undefined, key: string): boolean {
  if (!shard || shard.count === 1) return true;
  return fnv1a(key) % shard.count === shard.index - 1;
}

/** What one input item becomes: left to another shard, unusable (with the error row's fields), or a request. */
export type Prepared =
  | { kind: "other-shard" }
  | { kind: "invalid"; id: string; status: number; type: string; message: string }
  | { kind: "request"; id: string; keep: Record<string, unknown>; request: EvaluatorRequest; hash: string };

/**
 * The one path from an input item to a request, shared by `run` and
 * `estimate` so they count alike. `identity` is the model's (see `requestHash`).
 */
export function prepareItem(job: Job, item: SourceItem, shard: Shard | undefined, identity = ""): Prepared {
  if ("error" in item) {
    if (!inShard(shard, String(item.line))) return { kind: "other-shard" };
    return { kind: "invalid", id: String(item.line), status: 0, type: "invalid_record", message: `line ${item.line}: ${item.error}` };
  }
  const built = buildRequest(job, item.record, item.line);
  if (!inShard(shard, built.id)) return { kind: "other-shard" };
  if (!built.ok) return { kind: "invalid", id: built.id, status: 0, type: "invalid_record", message: `line ${item.line}: ${built.message}` };
  const checked = validateEvaluatorRequest(built.request);
  if (!checked.ok) {
    const detail = describeIssues(checked.errors);
    return { kind: "invalid", id: built.id, status: 422, type: "validation_error", message: `line ${item.line}: ${detail}` };
  }
  // Refused before any tokenizing: a body over the limit would be a 413 from any server.
  const text = requestText(checked.value);
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_BODY_BYTES) {
    return {
      kind: "invalid",
      id: built.id,
      status: 413,
      type: "payload_too_large",
      message: `line ${item.line}: the request would be ${formatBytes(bytes)}, over the ${formatBytes(MAX_BODY_BYTES)} a request may be`,
    };
  }
  return { kind: "request", id: built.id, keep: built.keep, request: checked.value, hash: requestHash(text, identity) };
}

/** FNV-1a of a string to [0, 1): the audit sample depends only on the seed and the record, never on order or resumption. */
export function unitHash(text: string): number {
  return mixedHash(text) / 4294967296;
}
