/**
 * What a report is about: the model that answered, the calibration its
 * answers carry (method per question, the file it came from, when and on
 * what that file was fitted), and the files read. Read from the run's usage
 * summary beside the answers and, when it names a calibration file that is
 * still there, from that file; a report without them says what it could not tell.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { findKind, kindOf, unitsOf } from "../questions/index.js";
import { loadJob, type Job } from "../records/job.js";
import type { UsageSummary } from "../records/usage.js";
import { describeIdentity } from "../evaluator/evaluator.js";
import { ENDPOINT_PROMPT_FORMAT, MIXED_PROMPT_FORMATS, recordedPromptFormat, UNKNOWN_PROMPT_FORMAT } from "../api/prompt-format.js";
import { escapeHtml, displayPath } from "./html.js";
import { num } from "./numbers.js";

type FileRole = "answers" | "gold" | "job" | "compare";
const ROLE_NAMES: Record<FileRole, string> = { answers: "Answers", gold: "Gold", job: "Job", compare: "Compared with" };

export interface Provenance {
  /** The versioned model id the answers name (usage summary, else the answers rows). */
  model?: string | undefined;
  /** What stood behind the model name (weights, template, endpoint), from the usage summary. */
  model_identity?: string | undefined;
  /** The prompt format the answers were read from (usage summary, else the rows; `unknown` when neither names one). */
  prompt_format: string;
  /** When the run started (its last invocation), from the usage summary. */
  run_started?: string | undefined;
  calibration: {
    /** applied: maps known; unknown: the answers carry raw probabilities but no usage summary says which maps; none: raw model probabilities. */
    state: "applied" | "unknown" | "none";
    /** A calibration file as the run named it, or "batch". */
    source?: string | undefined;
    /** Per question: method and temperature. */
    questions?: Record<string, { method: string; temperature: number }> | undefined;
    /** From the calibration file, when it is still there. */
    created?: string | undefined;
    fitted_on?: { answers: string; gold?: string | undefined } | undefined;
    fitted_for?: string | null | undefined;
  };
  /** Files as the user named them: answers, and gold, job, compare when given. */
  files: Partial<Record<FileRole, string>>;
}

/** A calibration file's own record of when and on what it was fitted. */
function calibrationFileFacts(source: string, usagePath: string): Pick<Provenance["calibration"], "created" | "fitted_on" | "fitted_for"> {
  for (const path of [source, resolve(dirname(usagePath), source)]) {
    if (!existsSync(path)) continue;
    try {
      const file = JSON.parse(readFileSync(path, "utf8")) as {
        kind?: string;
        created?: string;
        fitted_on?: { answers: string; gold?: string };
        identity?: string | null;
      };
      if (file.kind !== "typed-eval.calibration") return {};
      // Which gold rows (fitted_on.gold_ids) is for telling in-sample figures (sample.ts), not for the header.
      const fitted = file.fitted_on && { answers: file.fitted_on.answers, ...(file.fitted_on.gold ? { gold: file.fitted_on.gold } : {}) };
      return { created: file.created, fitted_on: fitted, fitted_for: file.identity };
    } catch {
      return {};
    }
  }
  return {};
}

/**
 * Score level texts the answers did not name (CSV and Parquet carry only the
 * most likely level's text per row): taken from the job file the run's usage
 * summary names, when it is still there and asks a score question of that
 * name with as many levels. Fills `levels` in place.
 */
export function fillLevels(
  questions: { name: string; type: string; labels: string[]; levels?: unknown[] | undefined }[],
  usage: UsageSummary | undefined,
  usagePath: string,
): void {
  const missing = questions.filter((q) => {
    const kind = findKind(q.type);
    return !kind?.parts && kind?.levels && (!q.levels || q.levels.some((l, i) => l === q.labels[i]));
  });
  if (missing.length === 0 || !usage?.job) return;
  let job: Job | undefined;
  for (const path of [usage.job, resolve(dirname(usagePath), usage.job)]) {
    if (!existsSync(path)) continue;
    try {
      job = loadJob(path);
      break;
    } catch {
      // A job file changed or broken since the run: the levels stay as the answers named them.
    }
  }
  if (!job) return;
  for (const q of missing) {
    const asked = unitsOf(job.questions).get(q.name)?.question;
    const texts = asked?.type === q.type ? kindOf(asked).levels?.(asked) : undefined;
    if (!texts || texts.length !== q.labels.length) continue;
    const levels = q.levels ?? [...q.labels];
    texts.forEach((c, i) => {
      if (levels[i] === q.labels[i] && typeof c === "string") levels[i] = c;
    });
    q.levels = levels;
  }
}

/** What the rows of answers said beside their answers: whether they carried raw probabilities, the model and prompt format the first named. */
export interface Seen {
  sawRaw: boolean;
  rowModel?: string | undefined;
  rowPromptFormat?: string | undefined;
}

/** Provenance of answers: `usage` is the run's summary (if any), `seen` what the rows said. */
export function provenanceOf(usage: UsageSummary | undefined, usagePath: string, seen: Seen, files: Partial<Record<FileRole, string | undefined>>): Provenance {
  const out: Provenance = {
    model: usage?.model ?? seen.rowModel,
    model_identity: usage?.model_identity,
    prompt_format: recordedPromptFormat(usage?.prompt_format ?? seen.rowPromptFormat),
    run_started: usage?.this_run?.started,
    calibration: { state: "none" },
    files: Object.fromEntries(Object.entries(files).filter((e) => e[1] !== undefined)),
  };
  const c = usage?.calibration;
  if (c) {
    out.calibration = {
      state: "applied",
      source: c.source,
      questions: Object.fromEntries(Object.entries(c.questions).map(([q, m]) => [q, { method: m.method, temperature: m.temperature }])),
      ...(c.source === "batch" ? {} : calibrationFileFacts(c.source, usagePath)),
    };
  } else if (seen.sawRaw) out.calibration = { state: "unknown" };
  return out;
}

/** The header rows of a report page. */
export function provenanceRows(p: Provenance, options: { raw?: boolean } = {}): [string, string][] {
  const rows: [string, string][] = [];
  const model = p.model ? escapeHtml(p.model) : '<span class="muted">not recorded (no usage summary beside the answers, no model in the rows)</span>';
  // The identity as a person names it ("local file model.gguf, 120 MB, chatml"), never the raw array resume compares.
  const behind = p.model_identity ? describeIdentity(p.model_identity) : undefined;
  rows.push(["Model", `${model}${behind && behind !== p.model ? ` <span class="muted">(${escapeHtml(behind)})</span>` : ""}`]);
  rows.push(["Prompt format", promptFormatHtml(p.prompt_format)]);
  const c = p.calibration;
  let cal: string;
  if (c.state === "none") cal = "none: the model's own probabilities";
  else if (c.state === "unknown") cal = "applied (the rows carry raw probabilities), but no usage summary says which maps";
  else {
    const methods = Object.entries(c.questions ?? {})
      .map(([q, m]) => `${escapeHtml(q)}: ${escapeHtml(methodText(m.method, m.temperature))}`)
      .join("; ");
    const from = c.source === "batch" ? "batch (label priors estimated from this run's own answers)" : `file ${escapeHtml(displayPath(c.source ?? ""))}`;
    const fitted = c.fitted_on
      ? `, fitted on ${escapeHtml(displayPath(c.fitted_on.answers))}${c.fitted_on.gold ? ` with gold ${escapeHtml(displayPath(c.fitted_on.gold))}` : ""}`
      : "";
    const when = c.created ? ` on ${escapeHtml(c.created.slice(0, 10))}` : "";
    cal = `${from}${fitted}${when}. ${methods}`;
  }
  if (options.raw) cal += ' <span class="bad">This page assesses the raw (uncalibrated) probabilities.</span>';
  rows.push(["Calibration", cal]);
  if (p.run_started) rows.push(["Run started", escapeHtml(p.run_started.replace("T", " ").replace(/\.\d+Z$/, " UTC"))]);
  for (const [role, path] of Object.entries(p.files)) rows.push([ROLE_NAMES[role as FileRole] ?? role, escapeHtml(displayPath(path))]);
  return rows;
}

/** A recorded prompt format, with what the values that name no one rendering mean. */
function promptFormatHtml(format: string): string {
  const why: Record<string, string> = {
    [UNKNOWN_PROMPT_FORMAT]: "not recorded (answers written before prompt formats were named)",
    [ENDPOINT_PROMPT_FORMAT]: "rendered by the remote endpoint, which does not name its format",
    [MIXED_PROMPT_FORMATS]: "the rows were read from more than one format (see the usage summary)",
  };
  return why[format] ? `${escapeHtml(format)} <span class="muted">(${why[format]})</span>` : escapeHtml(format);
}

/** "temperature 1.94", "platt (temperature 1.21, per-option bias)", "batch": a method said once. */
export function methodText(method: string, temperature: number): string {
  if (method === "temperature") return `temperature ${num(temperature)}`;
  if (method === "platt") return `platt (temperature ${num(temperature)} and a per-option bias)`;
  if (method === "none") return "none (raw answers were best)";
  return method;
}
