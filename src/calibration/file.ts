/**
 * The calibration file: what `typed-eval calibrate` writes and `run
 * --calibration` applies (one fitted map per question, with how it was
 * chosen), how it is read and checked, and how it is matched to a job's
 * questions.
 */
import { InvocationError } from "../api/errors.js";
import { readJsonFile } from "../api/json.js";
import type { Question } from "../api/schema.js";
import type { Method, QuestionCalibration } from "./maps.js";
import { unitsOf } from "../questions/index.js";

/** A calibration file or a calibration step that cannot be used: a bad input (exit 2). */
export class CalibrationError extends InvocationError {
  override name = "CalibrationError";
}

/** Held-out figures of one method. */
export interface HeldOut {
  log_loss: number;
  ece: number;
  brier: number;
  accuracy: number;
}

export interface FittedQuestion extends QuestionCalibration {
  /** Rows the final map was fitted on. */
  rows?: number;
  /** Cross-validated figures per method ("none" is the raw answers), when fitted on gold labels. */
  cross_validation?: { folds: number; seed: number; held_out: Partial<Record<Method, HeldOut>> };
  /** How far the map moved the mean label distribution (total variation distance), on the rows it was fitted on. */
  moved?: number;
  /** Mean label distribution before and after, on those rows. */
  shares_before?: number[];
  shares_after?: number[];
}

/** A calibration file: what `calibrate` writes and `run --calibration` applies. */
export interface CalibrationFile {
  kind: "typed-eval.calibration";
  version: 1;
  /** The model identity the answers came from (as the run journal keys it); null when unknown. */
  identity: string | null;
  /** The versioned model id the answers name. */
  model: string | null;
  created: string;
  /** The answers and gold fitted on; `gold_ids`, which gold rows (so an assessment on them can say its calibration figures are in-sample). */
  fitted_on: { answers: string; gold?: string; gold_ids?: IdKeys };
  questions: Record<string, FittedQuestion>;
}

/**
 * A set of record ids, compactly: the first 32 bits of each id's record key
 * (`recordKey` in src/quality/resample.ts), sorted, unique, as base64 of
 * big-endian words. 5,000 gold rows take 27 KB; two ids share a key about
 * once in 4 billion pairs, which is far below what telling a sample from
 * another needs.
 */
export interface IdKeys {
  count: number;
  key32: string;
}

/** Encodes keys (any order, repeats allowed) as IdKeys. */
export function encodeIdKeys(keys: Iterable<number>): IdKeys {
  const sorted = Uint32Array.from(new Set(keys)).sort();
  const bytes = Buffer.alloc(sorted.length * 4);
  sorted.forEach((k, i) => bytes.writeUInt32BE(k, i * 4));
  return { count: sorted.length, key32: bytes.toString("base64") };
}

/** The sorted keys of IdKeys; empty when they do not decode. */
export function decodeIdKeys(ids: IdKeys): Uint32Array {
  const bytes = Buffer.from(typeof ids.key32 === "string" ? ids.key32 : "", "base64");
  const out = new Uint32Array(Math.floor(bytes.length / 4));
  for (let i = 0; i < out.length; i++) out[i] = bytes.readUInt32BE(i * 4);
  // Sorted as written; sorted again so a file edited by hand cannot make a lookup miss.
  return out.sort();
}

/** Reads and checks a calibration file. */
export function loadCalibration(path: string): CalibrationFile {
  const file = readJsonFile(path, "calibration", CalibrationError) as Partial<CalibrationFile>;
  if (file.kind !== "typed-eval.calibration" || file.version !== 1 || typeof file.questions !== "object" || file.questions === null) {
    throw new CalibrationError(`${path} is not a typed-eval calibration file (write one with typed-eval calibrate)`);
  }
  for (const [name, q] of Object.entries(file.questions)) {
    const ok =
      Array.isArray(q.labels) &&
      Array.isArray(q.bias) &&
      q.bias.length === q.labels.length &&
      q.bias.every((b) => Number.isFinite(b)) &&
      typeof q.temperature === "number" &&
      q.temperature > 0 &&
      Number.isFinite(q.temperature);
    if (!ok) throw new CalibrationError(`${path}: question ${name}: needs labels, one finite bias per label and a positive temperature`);
  }
  return file as CalibrationFile;
}

/**
 * Checks a calibration against a job's questions: every calibrated unit (a
 * question, or a part `<question>.<part>`) must exist with the same labels
 * in the same order. Returns the maps by unit.
 */
export function calibrationFor(
  file: CalibrationFile,
  path: string,
  questions: Record<string, Question>,
  labelsOf: (q: Question) => string[],
): Map<string, QuestionCalibration> {
  const out = new Map<string, QuestionCalibration>();
  const units = unitsOf(questions);
  for (const [name, c] of Object.entries(file.questions)) {
    const q = units.get(name)?.question;
    if (!q) throw new CalibrationError(`${path} calibrates question "${name}", which the job does not ask; its questions: ${[...units.keys()].join(", ")}`);
    const labels = labelsOf(q);
    if (q.type !== c.type || labels.join("\u0000") !== c.labels.join("\u0000")) {
      throw new CalibrationError(
        `${path}: question ${name} was calibrated as a ${c.type} with labels ${c.labels.join(", ")}, but the job's has ${labels.join(", ")}; calibrate again`,
      );
    }
    out.set(name, c);
  }
  return out;
}

/** The map in words, each part once: "temperature 1.935", "platt: temperature 1.2, bias ...", "batch: bias ...". */
export function mapText(q: Pick<FittedQuestion, "method" | "temperature" | "bias">): string {
  const bias = `bias ${q.bias.map((b) => b.toFixed(2)).join(" ")}`;
  switch (q.method) {
    case "none":
      return "none (no map beat the raw answers on held-out rows)";
    case "temperature":
      return `temperature ${q.temperature.toFixed(3)}`;
    case "platt":
      return `platt: temperature ${q.temperature.toFixed(3)}, ${bias}`;
    default:
      return `${q.method}: ${bias}`;
  }
}

/** A fitted question in a few lines for people: its map, its held-out figures, how far it moved the answers. */
export function describeFit(name: string, q: FittedQuestion): string {
  const f = (x: number | undefined) => (x === undefined ? "n/a" : x.toFixed(3));
  let line = `${name} (${q.type}${q.rows !== undefined ? `, ${q.rows.toLocaleString("en-US")} rows` : ""}): ${mapText(q)}`;
  const cv = q.cross_validation;
  if (cv) {
    const none = cv.held_out.none;
    const chosen = cv.held_out[q.method];
    line += `\n  held out (${cv.folds}-fold): log loss ${f(none?.log_loss)} -> ${f(chosen?.log_loss)}, ECE ${f(none?.ece)} -> ${f(chosen?.ece)}, Brier ${f(none?.brier)} -> ${f(chosen?.brier)}, accuracy ${f(none?.accuracy)} -> ${f(chosen?.accuracy)}`;
    const others = Object.entries(cv.held_out).filter(([m]) => m !== "none" && m !== q.method);
    if (others.length) line += `\n  also tried: ${others.map(([m, h]) => `${m} (log loss ${f(h?.log_loss)}, ECE ${f(h?.ece)})`).join(", ")}`;
  }
  if (q.moved !== undefined) line += `\n  moved the mean label distribution by ${(q.moved * 100).toFixed(1)}% (total variation)`;
  return line;
}
