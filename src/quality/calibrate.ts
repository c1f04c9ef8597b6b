/**
 * `typed-eval calibrate`'s workflows over a run's answers: fitting on gold
 * labels (per question, temperature scaling and temperature plus per-option
 * bias, "platt", chosen and reported by k-fold cross-validation on held-out
 * rows, never in-sample numbers), batch calibration over the answers
 * themselves, and contextual calibration through the model that answered.
 * They read answers and gold labels and score with the quality metrics,
 * which is why they live here, above src/calibration (the maps, the file,
 * the label-free methods) and below the command, which only parses and
 * prints.
 */
import { AuthenticationError, PermissionDeniedError, TypedEvalError, UpstreamUnavailableError } from "../api/errors.js";
import { classify, VerdictError } from "../api/verdict.js";
import { type CalibrationFile, encodeIdKeys, type FittedQuestion, type HeldOut, type IdKeys } from "../calibration/file.js";
import { batchQuestion, contextualMaps } from "../calibration/label-free.js";
import { batchFlattens, fitData, fitMap, FITTED_METHODS, mapped, movement, type Method } from "../calibration/maps.js";
import type { Evaluator } from "../evaluator/evaluator.js";
import type { Job } from "../records/job.js";
import { readUsage, sidecarPlace } from "./sidecars.js";
import { QualityInputError, readAnswers, type QuestionInfo } from "./answers.js";
import { joinGold } from "./assess.js";
import { Rows } from "./rows.js";
import { calibrationError, confusion, accuracyOf, brier, logLoss, predictions, topLabelConfidence, type Scored } from "./metrics.js";
import { keyedFolds } from "./resample.js";

function heldOutFigures(s: Scored): HeldOut {
  const ones = new Float64Array(s.n).fill(1);
  const pred = predictions(s);
  const correct = Uint8Array.from(pred, (p, i) => (p === s.y[i] ? 1 : 0));
  return {
    log_loss: logLoss(s, ones),
    ece: calibrationError(topLabelConfidence(s), correct).ece,
    brier: brier(s, ones),
    accuracy: accuracyOf(confusion(s.y, pred, s.k, ones), s.k),
  };
}

/**
 * Fits a question's calibration on gold rows: each candidate method is
 * fitted on k-1 folds and scored on the held-out fold; the method with the
 * lowest held-out log loss is refitted on all rows (or `method` if named).
 */
export function fitQuestion(
  info: QuestionInfo,
  rows: Rows,
  options: { method: "auto" | "temperature" | "platt"; folds: number; seed: number },
): FittedQuestion {
  // Key order, and folds from a seeded hash of each record id: the same rows in any order choose the same method with the same numbers.
  const { s, keys } = rows.keyed();
  const { k, n } = s;
  if (n < options.folds * 2)
    throw new QualityInputError(`${info.name}: ${n} gold rows are too few for ${options.folds}-fold cross-validation (at least ${options.folds * 2})`);
  const data = fitData(s.p, s.y, k);
  const fold = keyedFolds(keys, n, options.seed, options.folds);
  const order = Int32Array.from({ length: n }, (_, i) => i);
  const candidates = options.method === "auto" ? [...FITTED_METHODS] : [options.method];
  const heldOut: Partial<Record<Method, HeldOut>> = { none: heldOutFigures(s) };
  for (const method of candidates) {
    const out = new Float64Array(s.p.length);
    for (let f = 0; f < options.folds; f++) {
      const train = Int32Array.from(order.filter((row) => fold[row] !== f));
      const fitted = fitMap(data, method, train);
      for (let i = 0; i < n; i++) {
        if (fold[i] !== f) continue;
        out.set(mapped(s.p.subarray(i * k, (i + 1) * k), k, fitted), i * k);
      }
    }
    heldOut[method] = heldOutFigures({ ...s, p: out });
  }
  // Auto keeps the raw answers when no method beats them on held-out rows: a map must earn its place.
  const pool: Method[] = options.method === "auto" ? ["none", ...candidates] : candidates;
  const chosen = pool.reduce((best, m) => ((heldOut[m] as HeldOut).log_loss < (heldOut[best] as HeldOut).log_loss ? m : best));
  const fitted = chosen === "none" ? { temperature: 1, bias: info.labels.map(() => 0) } : fitMap(data, chosen as "temperature" | "platt");
  return {
    type: info.type,
    method: chosen,
    temperature: fitted.temperature,
    bias: fitted.bias,
    labels: info.labels,
    rows: n,
    cross_validation: { folds: options.folds, seed: options.seed, held_out: heldOut },
    ...movement(s.p, k, fitted),
  };
}

/** The methods of `typed-eval calibrate`: auto, temperature and platt fit on gold labels; batch and contextual need none. */
export const CALIBRATION_METHODS = ["auto", "temperature", "platt", "batch", "contextual"] as const;
export type CalibrationMethod = (typeof CALIBRATION_METHODS)[number];

/** Whether a method fits on gold labels (and needs them). */
export function fitsOnGold(method: CalibrationMethod): method is "auto" | "temperature" | "platt" {
  return method === "auto" || method === "temperature" || method === "platt";
}

/** What `calibrateAnswers` is asked to do. */
export interface CalibrateOptions {
  answers: string;
  gold: string | undefined;
  method: CalibrationMethod;
  folds: number;
  seed: number;
  /** The job's units, when a job file was given (option order, level texts); else read from the answers. */
  questions: QuestionInfo[] | undefined;
  idField: string | undefined;
  jobIdField: string | undefined;
  allowUnmatched: boolean;
  /** batch: write the map even where it would flatten a skewed question. */
  force: boolean;
  /** contextual: the job, and how to open (and name, in a failure) the evaluator that answered. */
  contextual?: { job: Job; open: () => Promise<Evaluator>; where: string; keyEnv: string } | undefined;
}

/** A calibration file, and the warnings to print with it. */
export interface Calibrated {
  file: CalibrationFile;
  warnings: string[];
}

/** Fits a calibration on a run's answers by `method`; throws (nothing is written) when it cannot be used. */
export async function calibrateAnswers(options: CalibrateOptions): Promise<Calibrated> {
  const { identity, model } = await answersIdentity(options.answers);
  const file: CalibrationFile = {
    kind: "typed-eval.calibration",
    version: 1,
    identity,
    model,
    created: new Date().toISOString(),
    fitted_on: { answers: options.answers, ...(options.gold ? { gold: options.gold } : {}) },
    questions: {},
  };
  const warnings: string[] = [];
  if (fitsOnGold(options.method)) {
    const fitted = await fitOnGold(options, options.method);
    file.questions = fitted.questions;
    file.fitted_on.gold_ids = fitted.ids;
  } else if (options.method === "batch") file.questions = await fitBatch(options, warnings);
  else {
    const contextual = await fitContextual(options, identity);
    file.identity = contextual.identity;
    file.questions = contextual.questions;
  }
  if (Object.keys(file.questions).length === 0) throw new QualityInputError("nothing to calibrate: no question has rows");
  if (file.identity === null)
    warnings.push(`warning: no model identity is known for ${options.answers} (no usage file beside it): run --calibration will need --force-calibration`);
  return { file, warnings };
}

/** The model identity and versioned id a run's answers came from, from the usage summary beside them (on disk or in S3). */
async function answersIdentity(answers: string): Promise<{ identity: string | null; model: string | null }> {
  const usage = await readUsage(sidecarPlace(answers, "usage"));
  return { identity: usage?.model_identity ?? null, model: usage?.model ?? null };
}

/** Fits each question on its gold rows; `ids`, the gold rows fitted on (any question), by their record keys. */
async function fitOnGold(
  options: CalibrateOptions,
  method: "auto" | "temperature" | "platt",
): Promise<{ questions: Record<string, FittedQuestion>; ids: IdKeys }> {
  const joined = await joinGold(options.answers, options.gold as string, {
    questions: options.questions,
    idField: options.idField,
    jobIdField: options.jobIdField,
    raw: true,
    allowUnmatched: options.allowUnmatched,
  });
  const out: Record<string, FittedQuestion> = {};
  const keys: number[] = [];
  for (const q of joined.questions) {
    const rows = joined.rows.get(q.name) as Rows;
    if (rows.n === 0) continue;
    out[q.name] = fitQuestion(q, rows, { method, folds: options.folds, seed: options.seed });
    for (let i = 0; i < rows.n; i++) keys.push(rows.hi[i] as number);
  }
  return { questions: out, ids: encodeIdKeys(keys) };
}

/** Batch calibration; gold labels, when given, say whether a question's skew is real (a map that flattens one is refused without --force). */
async function fitBatch(options: CalibrateOptions, warnings: string[]): Promise<Record<string, FittedQuestion>> {
  const all = await allRows(options.answers, options.questions);
  const gold = options.gold
    ? await joinGold(options.answers, options.gold, {
        questions: options.questions,
        idField: options.idField,
        jobIdField: options.jobIdField,
        allowUnmatched: options.allowUnmatched,
      })
    : undefined;
  const out: Record<string, FittedQuestion> = {};
  const flattened: string[] = [];
  for (const q of all.questions) {
    const rows = all.rows.get(q.name);
    if (!rows || rows.n === 0) continue;
    const fitted = batchQuestion(q, rows.scored().p, q.labels.length);
    const goldRows = gold?.rows.get(q.name);
    const why = batchFlattens(q.name, fitted.shares_before ?? [], fitted.shares_after ?? [], goldRows && goldRows.n > 0 ? labelShares(goldRows) : undefined);
    if (why) flattened.push(why);
    out[q.name] = fitted;
  }
  if (flattened.length > 0 && !options.force) {
    throw new QualityInputError(
      `${flattened.join("; ")}; nothing written: ${options.gold ? "leave such a question out of batch calibration" : "pass --gold with labels to check the skew against"}, or --force to write it anyway`,
    );
  }
  for (const why of flattened) warnings.push(`warning: ${why} (written anyway: --force)`);
  return out;
}

/** Contextual calibration: the content-free states asked of the model that answered (refused when the answers name another). */
async function fitContextual(options: CalibrateOptions, identity: string | null): Promise<{ identity: string; questions: Record<string, FittedQuestion> }> {
  const contextual = options.contextual;
  if (!contextual) throw new QualityInputError("--method contextual asks the job's questions of content-free states: pass --job");
  const { job } = contextual;
  const evaluator = await contextual.open();
  try {
    const asked = evaluator.identity(job.model);
    if (identity !== null && identity !== asked) {
      throw new QualityInputError(
        `${options.answers} came from ${identity}, but the model asked here is ${asked}: contextual calibration must ask the model that answered`,
      );
    }
    let maps: Awaited<ReturnType<typeof contextualMaps>>["maps"];
    try {
      ({ maps } = await contextualMaps(
        job.questions,
        async (state) => (await evaluator.evaluate({ state, model: job.model, questions: job.questions })).response.answers,
      ));
    } catch (error) {
      if (!(error instanceof TypedEvalError)) throw error;
      throw remoteFailure(error, contextual.where, contextual.keyEnv);
    }
    const all = await allRows(options.answers, options.questions);
    const questions: Record<string, FittedQuestion> = {};
    for (const [name, map] of Object.entries(maps)) {
      const rows = all.rows.get(name);
      questions[name] = rows && rows.n > 0 ? { ...map, rows: rows.n, ...movement(rows.scored().p, rows.k, map) } : map;
    }
    return { identity: asked, questions };
  } finally {
    await evaluator.close();
  }
}

/** Every answered row's distributions (raw when the run calibrated), for the methods that need no gold. */
async function allRows(answers: string, questions: QuestionInfo[] | undefined): Promise<{ questions: QuestionInfo[]; rows: Map<string, Rows> }> {
  let found = questions;
  const rows = new Map<string, Rows>();
  for await (const row of await readAnswers(answers, { questions, onQuestions: (q) => (found = q) })) {
    for (const q of found ?? []) {
      let r = rows.get(q.name);
      if (!r) rows.set(q.name, (r = new Rows(q.labels.length)));
      r.push(row.raw?.get(q.name) ?? (row.dist.get(q.name) as number[]), 0, -1, row.id);
    }
  }
  return { questions: found ?? [], rows };
}

/** Each label's share of a question's gold rows. */
function labelShares(rows: Rows): number[] {
  const count = new Array<number>(rows.k).fill(0);
  for (let i = 0; i < rows.n; i++) count[rows.y[i] as number]! += 1;
  return count.map((c) => c / rows.n);
}

/**
 * Contextual calibration's remote failures as one line and the exit code a
 * scheduler acts on: 3 (rerun later) when the endpoint is down, busy or
 * refuses the key, 2 when it rejects the request itself (the job or flags
 * need fixing).
 */
function remoteFailure(error: TypedEvalError, where: string, keyEnv: string): VerdictError {
  const why = `contextual calibration asked ${where} the content-free states`;
  // The verdict (aborted, resumable; or the request's own fault) is the classifier's; the words say what to do here.
  const { verdict } = classify(error, "command");
  if (error instanceof UpstreamUnavailableError)
    return new VerdictError(verdict, `${why} and got no answer (${error.message}): check --base-url and that the endpoint is up, then rerun`);
  if (error instanceof AuthenticationError || error instanceof PermissionDeniedError)
    return new VerdictError(
      verdict,
      `${why}; it refused the key in $${keyEnv} (HTTP ${error.status}: ${error.message}): set it, or --api-key-env, to a key it accepts`,
    );
  if (error.retryable) return new VerdictError(verdict, `${why}; it failed with HTTP ${error.status} (${error.message}): rerun later`);
  return new VerdictError(
    verdict,
    `${why}; it rejected the request with HTTP ${error.status} (${error.message}): check that --job and the model name match what the endpoint serves`,
  );
}
