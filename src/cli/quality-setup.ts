/** What the quality commands (assess, thresholds, calibrate, report) set up alike before reading a night's answers. */
import { setFlagsFromString } from "node:v8";
import { loadJob } from "../records/job.js";
import { type QuestionInfo, unitInfos } from "../quality/answers.js";

/**
 * Streaming a million answers and gold rows makes garbage faster than V8
 * returns it: a 1,000,000-row assessment peaked at 465 MiB around about
 * 200 MiB of live data. This flag, read at every collection (as `run` sets
 * it), keeps the heap near its live size.
 */
export function favourSize(): void {
  setFlagsFromString("--optimize-for-size");
}

/** The questions of a job file, for the quality commands (option order and level texts). */
export function jobQuestions(path: string | undefined): { questions: QuestionInfo[] | undefined; idField: string | undefined } {
  if (!path) return { questions: undefined, idField: undefined };
  const job = loadJob(path);
  return { questions: unitInfos(job.questions), idField: job.id };
}
