/**
 * Job files: a question set, the model, and how a record becomes a request.
 * Checked in full before any record is read; every problem is reported.
 *
 * ```json
 * {
 *   "model": "default",
 *   "state": "ticket.body",          // a field or dotted path; omit for the whole record
 *   "id": "ticket_id",               // a field; omit to use the line number
 *   "keep": ["customer", "created"], // record fields copied to the output
 *   "questions": { "urgent": { "type": "noul", "instructions": "..." } }
 * }
 * ```
 */
import { describeIssues, InvocationError } from "../api/errors.js";
import { readFileSync } from "node:fs";
import { Type, type Static } from "@sinclair/typebox";
import { evaluatorRequestSchema, type Question } from "../api/schema.js";
import { validateAgainst, validateEvaluatorRequest } from "../api/validate.js";
import { answerColumnSuffixes, findKind, kindOf, unitName, unitsOf, type Unit } from "../questions/index.js";
import { missingJobHint } from "../records/bundled-jobs.js";

/** A job file's fields; its questions may be of any registered type (those registered in process too), so the schema is built when a job is read. */
const jobSchema = () =>
  Type.Object(
    {
      description: Type.Optional(Type.String()),
      model: Type.Optional(Type.String()),
      state: Type.Optional(Type.String({ description: "Field or dotted path of the state; omit for the whole record." })),
      id: Type.Optional(Type.String({ description: "Field holding the record id; omit for the line number." })),
      keep: Type.Optional(Type.Array(Type.String(), { description: "Record fields copied into each output row." })),
      calibration: Type.Optional(Type.String({ description: 'A calibration file (typed-eval calibrate), relative to the job file, or "batch".' })),
      review_below: Type.Optional(
        Type.Union(
          [
            Type.Number({ minimum: 0, maximum: 1 }),
            Type.Unsafe<Record<string, number>>({ type: "object", additionalProperties: Type.Number({ minimum: 0, maximum: 1 }) }),
          ],
          {
            description: "Send a row to review when a question's top-label probability is below this (one number for every question, or per question or part).",
          },
        ),
      ),
      audit_sample: Type.Optional(
        Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.String()], { description: 'Share of accepted rows sampled for audit: 0.01 or "1%".' }),
      ),
      questions: evaluatorRequestSchema().properties.questions,
    },
    // Unknown fields are reported by parseJob, which names the known ones.
    { additionalProperties: true },
  );

type JobFile = Omit<Static<ReturnType<typeof jobSchema>>, "questions"> & { questions: Record<string, Question> };
export type Job = JobFile & { model: string };

/** Columns every CSV output and review file has besides kept fields and answers. */
export const BUILT_IN_COLUMNS = ["id", "line", "source", "model", "input_tokens", "output_tokens", "dedup_of", "review_reason", "audit"];

export class JobError extends InvocationError {
  override name = "JobError";
}

/** Checks a parsed job file; `origin` names it in messages. */
export function parseJob(json: unknown, origin: string): Job {
  const problems: string[] = [];
  const JobSchema = jobSchema();
  const result = validateAgainst<JobFile>(JobSchema, json, []);
  if (!result.ok) {
    problems.push(...result.errors.map((e) => describeIssues([e])));
  }
  if (json && typeof json === "object" && !Array.isArray(json)) {
    const known = new Set(Object.keys(JobSchema.properties));
    for (const key of Object.keys(json)) {
      if (!known.has(key)) problems.push(`${key}: unknown field; a job file has ${[...known].join(", ")}`);
    }
  }
  if (problems.length === 0 && result.ok) {
    // The questions must also make a valid request (the same checks the API applies).
    const probe = validateEvaluatorRequest({ state: "", model: result.value.model ?? "default", questions: result.value.questions });
    if (!probe.ok) for (const e of probe.errors) problems.push(`${e.loc.slice(1).join(".")}: ${e.msg}`);
    const questions = result.value.questions;
    // A part's unit is named <question>.<part>: a question of that name would share its columns, calibration and review threshold.
    if (probe.ok) {
      for (const [name, question] of Object.entries(questions)) {
        for (const [part] of findKind(question)?.parts?.of(question) ?? []) {
          const unit = unitName(name, part);
          if (Object.hasOwn(questions, unit))
            problems.push(`questions.${unit}: the name of a part of ${name} (its columns are ${unit}.*); rename the question`);
        }
      }
    }
    const units: ReadonlyMap<string, Unit> = probe.ok && problems.length === 0 ? unitsOf(questions) : new Map();
    problems.push(...singleAnswerProblems(units), ...keepProblems(result.value.keep ?? [], units));
    const audit = result.value.audit_sample;
    if (audit !== undefined && parseShare(audit) === undefined) problems.push(`audit_sample: ${JSON.stringify(audit)} is not a share; write "1%" or 0.01`);
    const review = result.value.review_below;
    if (review !== undefined && typeof review === "object") {
      for (const name of Object.keys(review)) {
        if (!Object.hasOwn(questions, name) && !units.has(name))
          problems.push(`review_below.${name}: no such question or part; the questions are ${Object.keys(questions).join(", ")}`);
      }
    }
    for (const path of [result.value.state, result.value.id, ...(result.value.keep ?? [])]) {
      if (path !== undefined && (path === "" || path.split(".").some((p) => p === ""))) problems.push(`"${path}" is not a field name or dotted path`);
    }
  }
  if (problems.length > 0) {
    const list = [...new Set(problems)];
    throw new JobError(`${origin}: ${list.length} problem${list.length > 1 ? "s" : ""}:\n  ${list.join("\n  ")}`);
  }
  const job = result.ok ? result.value : (json as JobFile);
  return { ...job, model: job.model ?? "default" };
}

/** The spec accepts a question with one label (the server keeps its schema), but its every answer is p=1: a job would pay for nothing. */
function singleAnswerProblems(units: ReadonlyMap<string, Unit>): string[] {
  const problems: string[] = [];
  for (const [name, unit] of units) {
    const labels = kindOf(unit.question).labels(unit.question).length;
    if (labels < 2)
      problems.push(
        `questions.${name}: ${labels} possible answer${labels === 1 ? "" : "s"}: every answer would be certain (p=1) and each request paid for nothing; give it at least two`,
      );
  }
  return problems;
}

/** A kept field listed twice, or named like a column typed-eval writes itself. */
function keepProblems(keep: readonly string[], units: ReadonlyMap<string, Unit>): string[] {
  const builtIn = new Set(BUILT_IN_COLUMNS);
  for (const name of units.keys()) for (const suffix of answerColumnSuffixes()) builtIn.add(`${name}.${suffix}`);
  return keep.flatMap((field, i) => {
    if (keep.indexOf(field) !== i) return [`keep: "${field}" is listed twice`];
    if (builtIn.has(field) || /\.(p|raw)\./.test(field))
      return [
        `keep: "${field}" is also a column typed-eval writes in CSV outputs (${BUILT_IN_COLUMNS.join(", ")} and the questions' columns); a row would hold two "${field}" columns`,
      ];
    return [];
  });
}

/** Reads and checks a job file. */
export function loadJob(path: string): Job {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new JobError(`cannot read job file ${path}: ${(error as Error).message}${missingJobHint(path)}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    // The README's examples carry comments to explain fields; a copied example should say why it fails.
    const comments = /^\s*\/\/|\/\*|[,{[]\s*\/\/|"\s*\/\//m.test(text) ? ": comments (// or /* */) are not allowed in JSON job files; remove them" : "";
    throw new JobError(`${path} is not valid JSON${comments || `: ${(error as Error).message}`}`);
  }
  return parseJob(json, path);
}

/** Reads an audit share: "1%", "0.5%" or a fraction such as 0.01. Undefined when it is neither. */
export function parseShare(value: string | number): number | undefined {
  const text = String(value).trim();
  const share = text.endsWith("%") ? Number(text.slice(0, -1)) / 100 : Number(text);
  return text !== "" && text !== "%" && Number.isFinite(share) && share >= 0 && share <= 1 ? share : undefined;
}
