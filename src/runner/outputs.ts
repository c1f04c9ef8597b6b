/**
 * Outputs, written from the journal once a run's records are done: answers
 * as JSONL or CSV, failed records as JSONL, both to a path, stdout or S3.
 * Each record appears once (its latest entry wins), and files are written
 * under a temporary name and renamed, so a crash never leaves an output that
 * looks complete.
 */
import { createWriteStream, renameSync, rmSync } from "node:fs";
import type { Writable } from "node:stream";
import { stringify } from "csv-stringify/sync";
import type { Answer, Question } from "../api/schema.js";
import type { Job } from "./job.js";
import { readJournal, type AnswerEntry, type ErrorEntry } from "./journal.js";
import type { Format } from "./sources.js";

/** Where an output goes: stdout, a path, or anything else that yields a stream (S3). */
export interface OutputTarget {
  /** A writable for the output; `commit` makes it final, `abort` discards it. */
  open(): { stream: Writable; commit(): Promise<void>; abort(): Promise<void> };
  describe: string;
}

/** A local path (written as `<path>.partial`, renamed on success) or stdout for "-". */
export function localTarget(location: string): OutputTarget {
  if (location === "-") {
    return {
      describe: "stdout",
      open: () => ({ stream: process.stdout, commit: async () => undefined, abort: async () => undefined }),
    };
  }
  return {
    describe: location,
    open: () => {
      const partial = `${location}.partial`;
      const stream = createWriteStream(partial);
      const closed = () =>
        new Promise<void>((resolve, reject) => {
          stream.once("error", reject);
          stream.end(() => resolve());
        });
      return {
        stream,
        commit: async () => {
          await closed();
          renameSync(partial, location);
        },
        abort: async () => {
          await closed();
          rmSync(partial, { force: true });
        },
      };
    },
  };
}

/** CSV column names for a job: id, line, model, kept fields, each question's values, usage. */
export function csvColumns(job: Job): string[] {
  const columns = ["id", "line", "source", "model", ...(job.keep ?? [])];
  for (const [name, question] of Object.entries(job.questions) as [string, Question][]) {
    if (question.type === "noul") columns.push(`${name}.noul`);
    else if (question.type === "choice") {
      columns.push(`${name}.choice`, `${name}.confidence`, ...Object.keys(question.criteria).map((o) => `${name}.p.${o}`));
    } else {
      columns.push(`${name}.score`, `${name}.confidence`, ...question.criteria.map((_, k) => `${name}.p.${k}`));
    }
  }
  columns.push("input_tokens", "output_tokens", "dedup_of");
  return columns;
}

function csvRow(job: Job, e: AnswerEntry): unknown[] {
  const row: unknown[] = [e.id, e.line, e.source, e.model, ...(job.keep ?? []).map((f) => cell(e.keep?.[f]))];
  for (const [name, question] of Object.entries(job.questions) as [string, Question][]) {
    const a = e.answers[name] as Answer | undefined;
    if (question.type === "noul") row.push(a?.type === "noul" ? a.noul : "");
    else if (question.type === "choice") {
      const c = a?.type === "choice" ? a : undefined;
      row.push(c?.choice ?? "", c?.confidence ?? "", ...Object.keys(question.criteria).map((o) => c?.probabilities[o] ?? ""));
    } else {
      const s = a?.type === "score" ? a : undefined;
      row.push(s?.score ?? "", s?.confidence ?? "", ...question.criteria.map((_, k) => s?.probabilities[String(k)] ?? ""));
    }
  }
  row.push(e.usage.input_tokens, e.usage.output_tokens, e.dedup_of ?? "");
  return row;
}

function cell(value: unknown): unknown {
  return value === null || value === undefined ? "" : typeof value === "object" ? JSON.stringify(value) : value;
}

function jsonlRow(e: AnswerEntry): string {
  const row: Record<string, unknown> = { id: e.id, line: e.line, source: e.source, model: e.model, answers: e.answers, usage: e.usage };
  if (e.keep && Object.keys(e.keep).length > 0) row["fields"] = e.keep;
  if (e.dedup_of !== undefined) row["dedup_of"] = e.dedup_of;
  return `${JSON.stringify(row)}\n`;
}

async function write(stream: Writable, text: string): Promise<void> {
  if (!stream.write(text)) await new Promise<void>((resolve) => stream.once("drain", resolve));
}

export interface WrittenCounts {
  answered: number;
  failed: number;
  deduplicated: number;
  inputTokens: number;
  outputTokens: number;
}

/** Growable seq -> entry-number table (0 = none). */
class LastEntry {
  private table = new Uint32Array(1024);
  set(seq: number, entry: number): void {
    if (seq >= this.table.length) {
      let n = this.table.length;
      while (n <= seq) n *= 2;
      const next = new Uint32Array(n);
      next.set(this.table);
      this.table = next;
    }
    this.table[seq] = entry;
  }
  get(seq: number): number {
    return seq < this.table.length ? (this.table[seq] as number) : 0;
  }
}

/** Writes the answers and errors outputs from a journal; returns what was written. */
export async function writeOutputs(
  journalPath: string,
  job: Job,
  answers: { target: OutputTarget; format: Format },
  errors: OutputTarget,
): Promise<WrittenCounts> {
  // Pass 1: the latest entry of each record. A record answered after failing earlier counts as answered.
  const lastAnswer = new LastEntry();
  const lastError = new LastEntry();
  let n = 0;
  for await (const entry of readJournal(journalPath)) {
    n++;
    if (entry.k === "answer") lastAnswer.set(entry.seq, n);
    else if (entry.k === "error") lastError.set(entry.seq, n);
  }
  const counts: WrittenCounts = { answered: 0, failed: 0, deduplicated: 0, inputTokens: 0, outputTokens: 0 };
  const out = answers.target.open();
  const err = errors.open();
  try {
    if (answers.format === "csv") await write(out.stream, stringify([csvColumns(job)]));
    n = 0;
    for await (const entry of readJournal(journalPath)) {
      n++;
      if (entry.k === "answer" && lastAnswer.get(entry.seq) === n) {
        await write(out.stream, answers.format === "csv" ? stringify([csvRow(job, entry)]) : jsonlRow(entry));
        counts.answered++;
        if (entry.dedup_of !== undefined) counts.deduplicated++;
        counts.inputTokens += entry.usage.input_tokens;
        counts.outputTokens += entry.usage.output_tokens;
      } else if (entry.k === "error" && lastError.get(entry.seq) === n && lastAnswer.get(entry.seq) === 0) {
        const e: ErrorEntry = entry;
        await write(err.stream, `${JSON.stringify({ line: e.line, source: e.source, id: e.id, status: e.status, type: e.type, message: e.message })}\n`);
        counts.failed++;
      }
    }
    await out.commit();
    await err.commit();
  } catch (error) {
    await out.abort();
    await err.abort();
    throw error;
  }
  return counts;
}
