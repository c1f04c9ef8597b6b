/**
 * What an endpoint bills, in terms of what a request carries. A remote
 * endpoint frames a request its own way (system text, each question's
 * block, option labels, its tokenizer), so the characters of a request's
 * JSON are not its tokens: 30 support tickets that characters / 4 counts
 * as 8,695 tokens were billed 11,041 by typed-eval's own server on a model
 * with Qwen3's vocabulary, and 45,136 on one with a byte vocabulary.
 * What was billed says how it frames them: a run keeps the sums of a
 * least-squares fit of each request's billed input tokens on the
 * characters of its state and of its questions (`BillingSums`, in the usage
 * summary), and `estimate --from-usage` projects another night's requests
 * from the two rates they give (`billingRates`): tokens per character of
 * state, and per character of question (which carries the framing a
 * request's questions bring: a job with more questions pays more of it).
 */
import type { EvaluatorRequest } from "./schema.js";

/** The characters of a request's state and of its questions, as JSON: what a remote endpoint's bill is projected from. */
export interface RequestChars {
  state: number;
  questions: number;
}

/** A job's questions are one object for all its requests: their JSON is measured once. */
const questionChars = new WeakMap<object, number>();

/** The characters of a request's state and questions as JSON (the same count every estimate and every run's billing figures use). */
export function requestChars(request: Pick<EvaluatorRequest, "state" | "questions">): RequestChars {
  let questions = questionChars.get(request.questions);
  if (questions === undefined) {
    questions = JSON.stringify(request.questions).length;
    questionChars.set(request.questions, questions);
  }
  return { state: JSON.stringify(request.state).length, questions };
}

/**
 * The sufficient statistics of a fit of billed tokens `t` on state
 * characters `x` and question characters `y`, over the requests a run was
 * billed for (answered, not copied): sums that add across runs, shards and
 * nights.
 */
export interface BillingSums {
  requests: number;
  input_tokens: number;
  state_chars: number;
  question_chars: number;
  /** Sums of x*x, x*y, y*y, x*t and y*t. */
  xx: number;
  xy: number;
  yy: number;
  xt: number;
  yt: number;
}

export function noBilling(): BillingSums {
  return { requests: 0, input_tokens: 0, state_chars: 0, question_chars: 0, xx: 0, xy: 0, yy: 0, xt: 0, yt: 0 };
}

/** Adds one billed request. */
export function addBilled(sums: BillingSums, chars: RequestChars, inputTokens: number): void {
  const { state: x, questions: y } = chars;
  sums.requests++;
  sums.input_tokens += inputTokens;
  sums.state_chars += x;
  sums.question_chars += y;
  sums.xx += x * x;
  sums.xy += x * y;
  sums.yy += y * y;
  sums.xt += x * inputTokens;
  sums.yt += y * inputTokens;
}

const FIELDS = Object.keys(noBilling()) as (keyof BillingSums)[];

/** `into` plus `more` (or minus, with `sign` -1), field by field. */
export function addSums(into: BillingSums, more: BillingSums, sign = 1): BillingSums {
  for (const field of FIELDS) into[field] += sign * (more[field] ?? 0);
  return into;
}

/** Tokens billed per character of state and of question, and how they were found. */
export interface BillingRates {
  per_state_char: number;
  per_question_char: number;
  /** "least-squares": both rates fitted; "ratio": one rate for every character (the requests did not tell state from questions apart). */
  fit: "least-squares" | "ratio";
  /** The billed requests the rates come from. */
  requests: number;
}

/**
 * The rates that best explain what was billed: the least-squares solution
 * of t = s*x + q*y. When the requests cannot tell the two apart (every
 * state the same length, so x moves with y) or the fit is not positive,
 * one rate for every character: billed tokens over characters.
 */
export function billingRates(sums: BillingSums): BillingRates | undefined {
  if (sums.requests === 0 || sums.state_chars + sums.question_chars === 0) return undefined;
  const det = sums.xx * sums.yy - sums.xy * sums.xy;
  if (det > 1e-9 * sums.xx * sums.yy) {
    const s = (sums.xt * sums.yy - sums.yt * sums.xy) / det;
    const q = (sums.yt * sums.xx - sums.xt * sums.xy) / det;
    if (s > 0 && q > 0) return { per_state_char: s, per_question_char: q, fit: "least-squares", requests: sums.requests };
  }
  const ratio = sums.input_tokens / (sums.state_chars + sums.question_chars);
  return { per_state_char: ratio, per_question_char: ratio, fit: "ratio", requests: sums.requests };
}

/** A request's input tokens as the rates project them. */
export function projectTokens(rates: BillingRates, chars: RequestChars): number {
  return rates.per_state_char * chars.state + rates.per_question_char * chars.questions;
}
