/**
 * Suspect gold labels (`assess --suspects`): people label wrong too. Which
 * rows are suspect is confident learning's call (confident-learning.ts, by
 * the method chosen); this module holds one question's suspects at a time
 * compactly, ranks them and writes them out. The rank is the margin
 * p(model's label) - p(gold label), where the model's label is its most
 * probable option: largest first, then the higher p(model's label), then
 * question and id, so the order never depends on the order of the rows.
 */
import { createWriteStream, mkdirSync, renameSync, rmSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { QuestionInfo } from "./answers.js";
import { displayLabels, QualityInputError } from "./answers.js";
import type { Rows } from "./rows.js";
import type { Column, ColumnKind, Table } from "../records/format.js";
import { encoderOf, outputFormat } from "../records/formats.js";
import { orderBy } from "./metrics.js";
import { pct, plural } from "./numbers.js";
import { findSuspects, SUSPECT_METHODS, type SuspectMethod } from "./confident-learning.js";
import { estimateNoise, type NoiseKernel } from "./label-noise.js";
import { kindOf } from "../questions/index.js";

export { SUSPECT_METHODS, type SuspectMethod } from "./confident-learning.js";

/** The method `assess --suspects` uses unless told otherwise (bench/suspects.bench.ts, docs/quality.md). */
export const DEFAULT_SUSPECT_METHOD: SuspectMethod = "confident-joint";

/** What every suspect list is sorted by, largest first, as the JSON names it. */
export const SORT_KEY = "margin";

/** One suspect gold row, as the file and the report show it. */
export interface SuspectRow {
  id: string;
  question: string;
  /** The gold label, as people read it (no/yes for a noul, "2: angry" for a score level with text). */
  gold: string;
  /** The model's most probable option. */
  model_label: string;
  /** The model's probability of its label. */
  probability: number;
  /** The model's probability of the gold label. */
  gold_probability: number;
  /** probability - gold_probability, always above 0: the sort key. */
  margin: number;
}

/** Per question: how many gold rows are suspect, what confident learning estimated, and the most suspect rows. */
export interface QuestionSuspects {
  question: string;
  type: QuestionInfo["type"];
  rows: number;
  suspects: number;
  share: number;
  /**
   * The share of this question's gold labels estimated to be wrong, net of
   * what the model's own recalibrated uncertainty explains (label-noise.ts):
   * a disagreement the model's doubt accounts for is the model's slip, not a
   * wrong label.
   */
  estimated_noise: number;
  /** Its 95% interval (profile likelihood). */
  noise_interval: [number, number];
  /** What a wrong label is taken to be: any other option (noul, choice) or a neighbouring level (a type with ordered levels). */
  noise_kernel: NoiseKernel;
  /** The rows the estimate was computed on (at most label-noise's SAMPLE, the first in record-key order). */
  noise_rows: number;
  /**
   * Confident learning's 1 - trace(Q): every confident disagreement counted
   * as a wrong label, the model's own confident mistakes included, so it
   * reads high wherever the model is often wrong (a score's neighbouring
   * levels above all). Kept for comparison with cleanlab.
   */
  confident_joint_noise: number;
  /** Option -> t_j, the mean probability of j on rows gold-labelled j; null when no row is gold-labelled j (j is never a confident label). */
  thresholds: Record<string, number | null>;
  /** This question's most suspect rows (up to `TOP`), largest margin first. */
  top: SuspectRow[];
}

/** What `assess --suspects` adds to the assessment. */
export interface SuspectSummary {
  method: SuspectMethod;
  /** The field every list is sorted by, largest first. */
  sort_key: typeof SORT_KEY;
  total: number;
  /** The file every suspect was written to, when one was named. */
  file?: string;
  questions: QuestionSuspects[];
}

/** How many suspects of each question the JSON, text and HTML show; the file holds all. */
export const TOP = 10;

/**
 * Gold ids by gold row (what `Rows.ref` points at), as a few long strings
 * and an end offset each: a million ids held as a million strings cost about
 * three times the memory, and every collection walks them.
 */
export class GoldIds {
  /** Ids per block: a block's joined ids stay far below V8's longest string whatever the ids' length. */
  private static readonly BLOCK = 4096;
  private readonly blocks: string[] = [];
  private readonly ends: Int32Array;
  constructor(ids: readonly string[]) {
    this.ends = new Int32Array(ids.length);
    for (let b = 0; b < ids.length; b += GoldIds.BLOCK) {
      const part = ids.slice(b, b + GoldIds.BLOCK);
      let end = 0;
      part.forEach((id, i) => {
        end += id.length;
        this.ends[b + i] = end;
      });
      this.blocks.push(part.join(""));
    }
  }
  /** The id of gold row `i`. */
  at(i: number): string {
    const start = i % GoldIds.BLOCK === 0 ? 0 : (this.ends[i - 1] as number);
    return (this.blocks[Math.floor(i / GoldIds.BLOCK)] as string).slice(start, this.ends[i]);
  }
}

/** One question's suspects, held compactly and already in rank order (a million-row gold file can give hundreds of thousands). */
interface Held {
  info: QuestionInfo;
  labels: string[];
  /** Each suspect's gold row (an index into the gold ids). */
  ref: Int32Array;
  gold: Int32Array;
  label: Int32Array;
  p: Float64Array;
  pGold: Float64Array;
}

/** Gathers suspects question by question while the assessment holds each question's rows. */
export class Suspects {
  private readonly held: Held[] = [];
  private readonly perQuestion: Omit<QuestionSuspects, "top">[] = [];
  private ids = new GoldIds([]);
  file: string | undefined;

  constructor(readonly method: SuspectMethod = DEFAULT_SUSPECT_METHOD) {
    if (!SUSPECT_METHODS.includes(method)) throw new QualityInputError(`unknown suspects method ${method}; use ${SUSPECT_METHODS.join(" or ")}`);
  }

  /** Takes the gold ids by gold row (what `Rows.ref` points at), before the first `add`; keeps them compactly. */
  nameRows(ids: readonly string[]): void {
    this.ids = new GoldIds(ids);
  }

  /** Finds the suspects among one question's rows. */
  add(info: QuestionInfo, rows: Rows): void {
    const { n, k, p, y } = rows;
    const ids = this.ids;
    const found = findSuspects(rows, this.method, { hi: rows.hi, lo: rows.lo });
    const m = found.rows.length;
    const held: Held = {
      info,
      labels: displayLabels(info),
      ref: new Int32Array(m),
      gold: new Int32Array(m),
      label: new Int32Array(m),
      p: new Float64Array(m),
      pGold: new Float64Array(m),
    };
    const margin = new Float64Array(m);
    for (let i = 0; i < m; i++) {
      const r = found.rows[i] as number;
      let best = 0;
      for (let j = 1; j < k; j++) if ((p[r * k + j] as number) > (p[r * k + best] as number)) best = j;
      held.ref[i] = rows.ref[r] as number;
      held.gold[i] = y[r] as number;
      held.label[i] = best;
      held.p[i] = p[r * k + best] as number;
      held.pGold[i] = p[r * k + (y[r] as number)] as number;
      margin[i] = (held.p[i] as number) - (held.pGold[i] as number);
    }
    // By margin, descending (a radix sort); a run of equal margins by p(model's label), descending, then id.
    const order = orderBy(margin, true);
    const idOf = (i: number) => ids.at(held.ref[i] as number);
    for (let start = 0; start < m; ) {
      let end = start + 1;
      while (end < m && margin[order[end] as number] === margin[order[start] as number]) end++;
      if (end - start > 1) order.subarray(start, end).sort((a, b) => (held.p[b] as number) - (held.p[a] as number) || compareText(idOf(a), idOf(b)));
      start = end;
    }
    held.ref = held.ref.map((_, at) => held.ref[order[at] as number] as number);
    held.gold = held.gold.map((_, at) => held.gold[order[at] as number] as number);
    held.label = held.label.map((_, at) => held.label[order[at] as number] as number);
    held.p = held.p.map((_, at) => held.p[order[at] as number] as number);
    held.pGold = held.pGold.map((_, at) => held.pGold[order[at] as number] as number);
    this.held.push(held);
    let trace = 0;
    for (let j = 0; j < k; j++) trace += found.joint[j * k + j] as number;
    const t = found.thresholds;
    const noise = estimateNoise(rows, { kernel: kindOf(info.type).ordered ? "neighbour" : "any-other", keys: { hi: rows.hi, lo: rows.lo } });
    this.perQuestion.push({
      question: info.name,
      type: info.type,
      rows: n,
      suspects: m,
      share: n > 0 ? m / n : 0,
      estimated_noise: noise.estimate,
      noise_interval: noise.interval,
      noise_kernel: noise.kernel,
      noise_rows: noise.rows,
      confident_joint_noise: n > 0 ? 1 - trace / n : 0,
      thresholds: Object.fromEntries(info.labels.map((l, j) => [l, Number.isNaN(t[j] as number) ? null : (t[j] as number)])),
    });
  }

  /** The suspect at rank `at` of question `q`. */
  private row(q: number, at: number): SuspectRow {
    const h = this.held[q] as Held;
    const p = h.p[at] as number;
    const pGold = h.pGold[at] as number;
    return {
      id: this.ids.at(h.ref[at] as number),
      question: h.info.name,
      gold: h.labels[h.gold[at] as number] as string,
      model_label: h.labels[h.label[at] as number] as string,
      probability: p,
      gold_probability: pGold,
      margin: p - pGold,
    };
  }

  /**
   * Every suspect, most suspect first across questions: each question's list
   * is in rank order already, so this merges them (the question's name breaks
   * a tie on margin and probability, then the id).
   */
  private *merged(): Generator<[number, number]> {
    const next = this.held.map(() => 0);
    for (;;) {
      let best = -1;
      for (let q = 0; q < this.held.length; q++) {
        if ((next[q] as number) >= (this.held[q] as Held).ref.length) continue;
        if (best < 0 || this.before(q, next[q] as number, best, next[best] as number)) best = q;
      }
      if (best < 0) return;
      yield [best, next[best] as number];
      next[best]! += 1;
    }
  }

  /** Whether question a's suspect at rank i comes before question b's at rank j. */
  private before(a: number, i: number, b: number, j: number): boolean {
    const x = this.held[a] as Held;
    const y = this.held[b] as Held;
    const mx = (x.p[i] as number) - (x.pGold[i] as number);
    const my = (y.p[j] as number) - (y.pGold[j] as number);
    if (mx !== my) return mx > my;
    if (x.p[i] !== y.p[j]) return (x.p[i] as number) > (y.p[j] as number);
    return (compareText(x.info.name, y.info.name) || compareText(this.ids.at(x.ref[i] as number), this.ids.at(y.ref[j] as number))) < 0;
  }

  /** Every suspect, most suspect first across questions (for a file; the summary keeps each question's own top). */
  rows(limit = Number.POSITIVE_INFINITY): SuspectRow[] {
    const out: SuspectRow[] = [];
    for (const [q, at] of this.merged()) {
      if (out.length >= limit) break;
      out.push(this.row(q, at));
    }
    return out;
  }

  summary(): SuspectSummary {
    return {
      method: this.method,
      sort_key: SORT_KEY,
      total: this.held.reduce((s, h) => s + h.ref.length, 0),
      ...(this.file !== undefined ? { file: this.file } : {}),
      questions: this.perQuestion.map((q, i) => {
        const h = this.held[i] as Held;
        return { ...q, top: Array.from({ length: Math.min(TOP, h.ref.length) }, (_, at) => this.row(i, at)) };
      }),
    };
  }

  /**
   * Writes every suspect, most suspect first, in the format its extension
   * names (formats.ts; one no format has is refused, exit 2), each row naming
   * the method, under a temporary name renamed at the end: a failure leaves
   * no half-written file.
   */
  async write(path: string): Promise<void> {
    const encoder = encoderOf(outputFormat(path, { what: "suspects" }), suspectsTable(this.method));
    const partial = `${path}.partial`;
    try {
      mkdirSync(dirname(resolve(path)), { recursive: true });
    } catch (error) {
      throw new QualityInputError(`cannot write suspects ${path}: ${(error as Error).message}; choose another path`);
    }
    const out = createWriteStream(partial);
    const failed = new Promise<never>((_, reject) => out.once("error", reject));
    failed.catch(() => undefined);
    const put = async (chunk: string | Uint8Array) => {
      if (chunk.length > 0 && !out.write(chunk)) await Promise.race([new Promise<void>((resolve) => out.once("drain", () => resolve())), failed]);
    };
    try {
      const chunk: (string | Uint8Array)[] = [];
      // Written a thousand rows at a time: one call to the stream per batch.
      const flush = async () => {
        const texts = chunk.every((c) => typeof c === "string");
        await put(texts ? chunk.join("") : Buffer.concat(chunk.map((c) => (typeof c === "string" ? Buffer.from(c) : c))));
        chunk.length = 0;
      };
      for (const [q, at] of this.merged()) {
        chunk.push(encoder.row(this.row(q, at)));
        if (chunk.length === 1000) await flush();
      }
      chunk.push(encoder.end());
      await flush();
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

/** The columns of a suspects file, in order, before `method`. */
export const SUSPECT_COLUMNS: readonly (keyof SuspectRow)[] = ["id", "question", "gold", "model_label", "probability", "gold_probability", "margin"];

/** A suspects file as a table: its columns, then the method that named the rows. */
function suspectsTable(method: SuspectMethod): Table<SuspectRow> {
  const kind = (c: keyof SuspectRow): ColumnKind => (c === "probability" || c === "gold_probability" || c === "margin" ? "double" : "string");
  return {
    columns: [
      ...SUSPECT_COLUMNS.map((c): Column<SuspectRow> => ({ name: c, kind: kind(c), value: (r) => r[c] })),
      { name: "method", kind: "string", value: () => method },
    ],
    record: (r) => ({ ...r, method }),
  };
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A probability or margin for the terminal. */
const fixed = (x: number) => x.toFixed(3);

/** The label-noise estimate in words, with its interval, its count and what it counts as wrong (terminal and HTML). */
export function noiseText(q: Pick<QuestionSuspects, "estimated_noise" | "noise_interval" | "noise_kernel" | "noise_rows">): string {
  const counts =
    q.noise_kernel === "neighbour"
      ? "a label a level away from the true one, beyond the model's own doubt between neighbouring levels"
      : "a label other than the true one, beyond the model's own doubt";
  return `estimated ${pct(q.estimated_noise)} of its gold labels wrong (95%: ${pct(q.noise_interval[0])}–${pct(q.noise_interval[1])}, on ${plural(q.noise_rows, "row")}; counts as wrong ${counts})`;
}

/** The suspects part of the terminal table: per question, its count and its own most suspect rows with their margin. */
export function describeSuspects(s: SuspectSummary): string {
  const lines = [
    "",
    `suspect gold labels (${s.method}; each list sorted by margin = p(model's label) - p(gold label)): ${s.total}${s.file ? `, all written to ${s.file}` : ""}`,
  ];
  for (const q of s.questions) {
    lines.push(`  ${q.question}: ${q.suspects} of ${q.rows} gold rows (${(q.share * 100).toFixed(1)}%); ${noiseText(q)}`);
    if (q.top.length === 0) continue;
    lines.push("    margin  id: gold -> model (p model, p gold)");
    for (const r of q.top)
      lines.push(`    ${fixed(r.margin)}   ${r.id}: ${r.gold} -> ${r.model_label} (${fixed(r.probability)}, ${fixed(r.gold_probability)})`);
    if (q.suspects > q.top.length) lines.push(`    ... ${q.suspects - q.top.length} more${s.file ? ` in ${s.file}` : " (name a file with --suspects FILE)"}`);
  }
  return lines.join("\n");
}
