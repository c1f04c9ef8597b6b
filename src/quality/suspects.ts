/**
 * Suspect gold labels by confident learning (Northcutt, Jiang and Chuang,
 * "Confident Learning: Estimating Uncertainty in Dataset Labels", JAIR 2021).
 * People label wrong too: a gold row is suspect when the model's answer to it
 * is confidently another option. "Confidently" is per option, from the model's
 * own behaviour: option j's threshold t_j is the mean probability the model
 * gives j on the rows gold-labelled j. A row gold-labelled i counts as
 * confidently labelled j when p_j >= t_j (the most probable such j when
 * several pass); it is a suspect when that j is not i (an off-diagonal cell of
 * the confident joint). Suspects are ranked by margin, p_j - p_i, the most
 * confident contradiction first, then by p_j, question and id, so the order
 * never depends on the order of the rows.
 */
import { createWriteStream, mkdirSync, renameSync, rmSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { QuestionInfo } from "./answers.js";
import { displayLabels, QualityInputError } from "./answers.js";
import type { Rows } from "./rows.js";
import { csvCell, csvLine } from "./csv-line.js";
import { orderBy } from "./metrics.js";

/** One suspect gold row, as the file and the report show it. */
export interface SuspectRow {
  id: string;
  question: string;
  /** The gold label, as people read it (no/yes for a noul, "2: angry" for a score level with text). */
  gold: string;
  /** The option the model confidently gives instead. */
  model_label: string;
  /** The model's probability of its label. */
  probability: number;
  /** The model's probability of the gold label. */
  gold_probability: number;
  /** probability - gold_probability: the ranking key. */
  margin: number;
}

/** Per question: how many gold rows are suspect, and the per-option thresholds that decided it. */
export interface QuestionSuspects {
  question: string;
  type: QuestionInfo["type"];
  rows: number;
  suspects: number;
  share: number;
  /** Option -> t_j, the mean probability of j on rows gold-labelled j; null when no row is gold-labelled j (j is never a confident label). */
  thresholds: Record<string, number | null>;
}

/** What `assess --suspects` adds to the assessment. */
export interface SuspectSummary {
  method: "confident learning";
  total: number;
  /** The file every suspect was written to, when one was named. */
  file?: string;
  questions: QuestionSuspects[];
  /** The most confident suspects (up to `TOP`), in file order. */
  top: SuspectRow[];
}

/** How many suspects the JSON, text and HTML show; the file holds all. */
export const TOP = 20;

/** One question's suspects, held compactly (a million-row gold file can give hundreds of thousands). */
interface Found {
  info: QuestionInfo;
  labels: string[];
  ids: readonly string[];
  ref: Int32Array;
  gold: Int32Array;
  label: Int32Array;
  p: Float64Array;
  pGold: Float64Array;
}

/** The confident-learning thresholds t_j of one question's rows; NaN where no row is gold-labelled j. */
export function confidentThresholds(rows: Pick<Rows, "n" | "k" | "p" | "y">): Float64Array {
  const { n, k, p, y } = rows;
  const sum = new Float64Array(k);
  const count = new Float64Array(k);
  for (let r = 0; r < n; r++) {
    const g = y[r] as number;
    sum[g]! += p[r * k + g] as number;
    count[g]! += 1;
  }
  return sum.map((s, j) => ((count[j] as number) > 0 ? s / (count[j] as number) : Number.NaN));
}

/** Gathers suspects question by question while the assessment holds each question's rows. */
export class Suspects {
  private readonly found: Found[] = [];
  private readonly perQuestion: QuestionSuspects[] = [];
  private order: { q: Int32Array; at: Int32Array } | undefined;
  file: string | undefined;

  /** Finds the suspects among one question's rows; `ids` names each row's gold row (`rows.ref`). */
  add(info: QuestionInfo, rows: Rows, ids: readonly string[]): void {
    const { n, k, p, y } = rows;
    const t = confidentThresholds(rows);
    const hits: number[] = [];
    const labels: number[] = [];
    for (let r = 0; r < n; r++) {
      let best = -1;
      let bestP = -1;
      for (let j = 0; j < k; j++) {
        const pj = p[r * k + j] as number;
        // NaN (no row gold-labelled j) never passes.
        if (pj >= (t[j] as number) && pj > bestP) {
          best = j;
          bestP = pj;
        }
      }
      if (best >= 0 && best !== y[r]) {
        hits.push(r);
        labels.push(best);
      }
    }
    const m = hits.length;
    const found: Found = {
      info,
      labels: displayLabels(info),
      ids,
      ref: new Int32Array(m),
      gold: new Int32Array(m),
      label: Int32Array.from(labels),
      p: new Float64Array(m),
      pGold: new Float64Array(m),
    };
    hits.forEach((r, i) => {
      found.ref[i] = rows.ref[r] as number;
      found.gold[i] = y[r] as number;
      found.p[i] = p[r * k + (labels[i] as number)] as number;
      found.pGold[i] = p[r * k + (y[r] as number)] as number;
    });
    this.found.push(found);
    this.order = undefined;
    this.perQuestion.push({
      question: info.name,
      type: info.type,
      rows: n,
      suspects: m,
      share: n > 0 ? m / n : 0,
      thresholds: Object.fromEntries(info.labels.map((l, j) => [l, Number.isNaN(t[j] as number) ? null : (t[j] as number)])),
    });
  }

  /** Every suspect, most confident first: (question index, position) pairs. */
  private ranked(): { q: Int32Array; at: Int32Array } {
    if (this.order) return this.order;
    const total = this.found.reduce((s, f) => s + f.ref.length, 0);
    const idx = new Int32Array(total);
    const qOf = new Int32Array(total);
    const atOf = new Int32Array(total);
    let i = 0;
    this.found.forEach((f, q) => {
      for (let a = 0; a < f.ref.length; a++, i++) {
        idx[i] = i;
        qOf[i] = q;
        atOf[i] = a;
      }
    });
    const margin = (x: number) => {
      const f = this.found[qOf[x] as number] as Found;
      const a = atOf[x] as number;
      return (f.p[a] as number) - (f.pGold[a] as number);
    };
    const margins = Float64Array.from(idx, margin);
    const prob = Float64Array.from(idx, (x) => (this.found[qOf[x] as number] as Found).p[atOf[x] as number] as number);
    const id = (x: number) => {
      const f = this.found[qOf[x] as number] as Found;
      return f.ids[f.ref[atOf[x] as number] as number] as string;
    };
    // By margin, then probability, both descending (radix sorts: a comparison sort of two million suspects took seconds);
    // then each run that ties on both by question and id, so the order never depends on the rows'.
    const order = orderBy(margins, true, orderBy(prob, true));
    for (let start = 0; start < order.length; ) {
      let end = start + 1;
      const first = order[start] as number;
      while (end < order.length && margins[order[end] as number] === margins[first] && prob[order[end] as number] === prob[first]) end++;
      if (end - start > 1)
        order
          .subarray(start, end)
          .sort(
            (a, b) =>
              compareText((this.found[qOf[a] as number] as Found).info.name, (this.found[qOf[b] as number] as Found).info.name) || compareText(id(a), id(b)),
          );
      start = end;
    }
    this.order = { q: permuted(order, qOf), at: permuted(order, atOf) };
    return this.order;
  }

  /** The i-th most confident suspect. */
  private row(q: number, at: number): SuspectRow {
    const f = this.found[q] as Found;
    const p = f.p[at] as number;
    const pGold = f.pGold[at] as number;
    return {
      id: f.ids[f.ref[at] as number] as string,
      question: f.info.name,
      gold: f.labels[f.gold[at] as number] as string,
      model_label: f.labels[f.label[at] as number] as string,
      probability: p,
      gold_probability: pGold,
      margin: p - pGold,
    };
  }

  /** The first `limit` suspects, most confident first. */
  rows(limit = Number.POSITIVE_INFINITY): SuspectRow[] {
    const { q, at } = this.ranked();
    const out: SuspectRow[] = [];
    for (let i = 0; i < q.length && i < limit; i++) out.push(this.row(q[i] as number, at[i] as number));
    return out;
  }

  summary(): SuspectSummary {
    const total = this.found.reduce((s, f) => s + f.ref.length, 0);
    return {
      method: "confident learning",
      total,
      ...(this.file !== undefined ? { file: this.file } : {}),
      questions: this.perQuestion,
      top: this.rows(TOP),
    };
  }

  /**
   * Writes every suspect, most confident first, as CSV (`.csv`) or JSONL
   * (anything else), under a temporary name renamed at the end: a failure
   * leaves no half-written file.
   */
  async write(path: string): Promise<void> {
    const csv = /\.csv$/i.test(path);
    const partial = `${path}.partial`;
    try {
      mkdirSync(dirname(resolve(path)), { recursive: true });
    } catch (error) {
      throw new QualityInputError(`cannot write suspects ${path}: ${(error as Error).message}; choose another path`);
    }
    const out = createWriteStream(partial);
    const failed = new Promise<never>((_, reject) => out.once("error", reject));
    failed.catch(() => undefined);
    const put = async (text: string) => {
      if (!out.write(text)) await Promise.race([new Promise<void>((resolve) => out.once("drain", () => resolve())), failed]);
    };
    const columns: (keyof SuspectRow)[] = ["id", "question", "gold", "model_label", "probability", "gold_probability", "margin"];
    try {
      if (csv) await put(csvLine(columns));
      const { q, at } = this.ranked();
      // A question's name and labels as CSV cells, quoted once rather than on each of a million lines.
      const cellsOf = this.found.map((f) => ({ question: csvCell(f.info.name), labels: f.labels.map(csvCell) }));
      const chunk: string[] = [];
      for (let i = 0; i < q.length; i++) {
        const r = this.row(q[i] as number, at[i] as number);
        if (csv) {
          const c = cellsOf[q[i] as number] as { question: string; labels: string[] };
          const f = this.found[q[i] as number] as Found;
          const a = at[i] as number;
          chunk.push(
            `${csvCell(r.id)},${c.question},${c.labels[f.gold[a] as number]},${c.labels[f.label[a] as number]},${r.probability},${r.gold_probability},${r.margin}\n`,
          );
        } else chunk.push(`${JSON.stringify(r)}\n`);
        if (chunk.length === 1000 || i === q.length - 1) {
          await put(chunk.join(""));
          chunk.length = 0;
        }
      }
      await Promise.race([new Promise<void>((resolve) => out.end(resolve)), failed]);
      renameSync(partial, path);
    } catch (error) {
      out.destroy();
      rmSync(partial, { force: true });
      throw new QualityInputError(`cannot write suspects ${path}: ${(error as Error).message}; choose another path`);
    }
    this.file = path;
  }
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** `from` permuted by `order`. */
function permuted(order: Int32Array, from: Int32Array): Int32Array {
  return Int32Array.from(order, (i) => from[i] as number);
}

/** The suspects part of the terminal table. */
export function describeSuspects(s: SuspectSummary): string {
  const lines = [
    "",
    `suspect gold labels (confident learning): ${s.total}${s.file ? `, all written to ${s.file}` : ""}`,
    ...s.questions.map((q) => `  ${q.question.padEnd(22)} ${String(q.suspects).padStart(6)} of ${q.rows} gold rows (${(q.share * 100).toFixed(1)}%)`),
  ];
  if (s.top.length > 0) {
    lines.push(`  most confident${s.total > s.top.length ? ` ${s.top.length}` : ""}: id, question: gold -> model (probability)`);
    for (const r of s.top) lines.push(`    ${r.id}, ${r.question}: ${r.gold} -> ${r.model_label} (${r.probability.toFixed(3)})`);
  }
  return lines.join("\n");
}
