/**
 * Quality and drift gates: `--fail-if "urgent.ece>0.05,team.recall[\"billing\"]<0.6,psi>0.2"`
 * for `assess` and `report`. One parser and one checker; each command only
 * says which questions and metrics exist and what their values are.
 *
 * A per class metric names its class as a JSON string in brackets, so a
 * class with spaces, commas, dots, brackets or quotes in its name survives:
 * `team.recall["account access, login"]<0.6`. After the limit, `min N` asks
 * that the figure rest on at least N rows and `interval` that its whole 95%
 * interval clear the limit; `verdict>ok` gates on the verdict's marks. A
 * gate that checks nothing (empty, or a limit the metric can never pass) is
 * refused.
 */
import { QualityInputError } from "./answers.js";
import { CLASS_METRICS, classGateName, DRIFT_METRICS, gateName, METRIC_TABLE, type Metric, type Range, VERDICT_GATE } from "./metric-table.js";

/** A gate condition: `question.metric` (or a bare `metric`: every question), a class for a per class metric, compared with a number. */
export interface Condition {
  /** Undefined: the metric of every question. */
  question?: string | undefined;
  metric: string;
  /** The class of a per class metric (`recall["billing"]`). */
  option?: string | undefined;
  op: ">" | "<" | ">=" | "<=";
  /** The limit; for a `verdict` condition, the mark's rank (ok 0, look 1, act 2). */
  value: number;
  /** `min N`: the figure must rest on at least N rows; on fewer the condition holds. */
  min?: number;
  /** `interval`: judged on the figure's 95% interval: the condition holds when any value of it would. */
  interval?: boolean;
  text: string;
}

/** The key a condition reads in a question's metrics: `ece`, or `recall["billing"]`. */
export const conditionKey = (c: Pick<Condition, "metric" | "option">) => (c.option === undefined ? c.metric : classGateName(c.metric, c.option));

/** A condition that holds for one question: a breach. */
export interface Breach {
  condition: Condition;
  question: string;
  /** NaN when the figure could not be computed (a breach too: a gate fails closed); a `verdict` condition's: the mark's rank. */
  actual: number;
  /** The rows the figure rests on, when the condition asks a minimum. */
  support?: number | undefined;
  /** The figure's 95% interval, when the condition is judged on it. */
  range?: readonly [number, number] | undefined;
  /** A `verdict` condition's: the question's mark. */
  mark?: string;
}

/** What a gate checks against: each question's metrics by gate key (undefined: the metric does not exist for that question). */
export interface GateSubject {
  questions: {
    name: string;
    metrics: Record<string, number | undefined>;
    /** The rows each figure rests on, by gate key (what `min N` reads). */
    support?: Record<string, number>;
    /** 95% intervals, by gate key (what `interval` reads). */
    intervals?: Record<string, readonly [number, number]>;
  }[];
  /** Keys a metric may take, for the message when one is unknown. */
  known: (question: string) => string[];
}

const HOW = `write question.metric>number, metric>number (every question) or question.recall["class"]<number, optionally followed by min N or interval, e.g. urgent.ece>0.05,team.recall["billing"]<0.6 min 30`;

/** Splits at the commas that are outside a quoted class name. */
function splitConditions(text: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted && c === "\\") i++;
    else if (c === '"') quoted = !quoted;
    else if (c === "," && !quoted) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== "");
}

/** Where the comparison is: the last operator outside a quoted class name. */
function operatorAt(part: string): { at: number; op: Condition["op"] } | undefined {
  let found: { at: number; op: Condition["op"] } | undefined;
  let quoted = false;
  for (let i = 0; i < part.length; i++) {
    const c = part[i];
    if (quoted) {
      if (c === "\\") i++;
      else if (c === '"') quoted = false;
      continue;
    }
    if (c === '"') quoted = true;
    else if (c === "<" || c === ">") {
      const op = (part[i + 1] === "=" ? `${c}=` : c) as Condition["op"];
      found = { at: i, op };
      if (op.length === 2) i++;
    }
  }
  return found;
}

/** The limit and what follows it: `0.6`, `0.6 min 30`, `0.9 interval`; a `verdict` condition's limit is a mark. */
function parseLimit(rhs: string, metric: string, fail: () => Error): Pick<Condition, "value" | "min" | "interval"> {
  const [limit = "", ...words] = rhs.split(/\s+/);
  let value: number;
  if (metric === VERDICT_GATE.name) {
    value = (VERDICT_GATE.marks as readonly string[]).indexOf(limit);
    if (value < 0) throw new QualityInputError(`--fail-if: the verdict is ${VERDICT_GATE.marks.join(", ")}; cannot read "${rhs}" as one (e.g. verdict>ok)`);
  } else {
    if (!/^-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?$/i.test(limit) || !Number.isFinite(Number(limit))) throw fail();
    value = Number(limit);
  }
  const out: Pick<Condition, "value" | "min" | "interval"> = { value };
  for (let i = 0; i < words.length; i++) {
    const word = words[i];
    if (word === "interval" && !out.interval) out.interval = true;
    else if (word === "min" && out.min === undefined && /^[1-9]\d*$/.test(words[i + 1] ?? "")) out.min = Number(words[++i]);
    else throw fail();
  }
  return out;
}

function parseCondition(part: string): Condition {
  const fail = () => new QualityInputError(`--fail-if: cannot read "${part}"; ${HOW}`);
  const found = operatorAt(part);
  if (!found) throw fail();
  const rhs = part.slice(found.at + found.op.length).trim();
  let name = part.slice(0, found.at).trim();
  let option: string | undefined;
  const open = name.indexOf('["');
  if (open >= 0) {
    if (!name.endsWith('"]')) throw fail();
    try {
      const parsed: unknown = JSON.parse(name.slice(open + 1, -1));
      if (typeof parsed !== "string") throw fail();
      option = parsed;
    } catch {
      throw fail();
    }
    name = name.slice(0, open);
  }
  const m = /^(?:(.+)\.)?([a-z][a-z0-9_]*)$/i.exec(name);
  if (!m) throw fail();
  const metric = m[2] as string;
  return { question: m[1], metric, option, op: found.op, ...parseLimit(rhs, metric, fail), text: part };
}

/** Parses `--fail-if "urgent.ece>0.05,team.recall[\"billing\"]<0.6 min 30,agreement<0.9"`; one that holds no condition is refused: a gate must check something. */
export function parseConditions(text: string): Condition[] {
  const parts = splitConditions(text);
  if (parts.length === 0) throw new QualityInputError(`--fail-if: "${text}" holds no condition, so it would check nothing; ${HOW}`);
  return parts.map(parseCondition);
}

/** Whether a condition can never hold for a figure in `range` (`ece>5`, `accuracy<0`). */
function neverHolds(c: Pick<Condition, "op" | "value">, [lo, hi]: Range): boolean {
  if (c.op === ">") return c.value >= hi;
  if (c.op === ">=") return c.value > hi;
  if (c.op === "<") return c.value <= lo;
  return c.value < lo;
}

/** The values a gate name can take, and whether it has an interval and a support: undefined for a name no table declares. */
function declared(name: string, table: readonly Metric[]): { range: Range; interval: boolean; support: boolean } | undefined {
  if (name === VERDICT_GATE.name) return { range: [0, VERDICT_GATE.marks.length - 1], interval: false, support: false };
  const metric = table.find((m) => gateName(m) === name);
  if (metric) return { range: metric.range, interval: metric.interval !== undefined, support: true };
  const perClass = CLASS_METRICS.find((m) => m.name === name);
  if (perClass) return { range: perClass.range, interval: true, support: true };
  const drift = DRIFT_METRICS.find((m) => m.name === name);
  return drift ? { range: drift.range, interval: false, support: true } : undefined;
}

/** A gate that checks nothing is refused: a limit the metric can never pass, `interval` on a figure without one, `min` on the verdict. */
function checkEvidence(c: Condition, table: readonly Metric[]): void {
  const d = declared(c.metric, table);
  if (!d) return;
  const [lo, hi] = d.range;
  if (neverHolds(c, d.range)) {
    const values = c.metric === VERDICT_GATE.name ? VERDICT_GATE.marks.join(" < ") : Number.isFinite(hi) ? `between ${lo} and ${hi}` : `${lo} or more`;
    throw new QualityInputError(`--fail-if: ${c.metric} is ${values}, so "${c.text}" can never hold and would check nothing; set a limit inside that range`);
  }
  if (c.interval && !d.interval) {
    const withOne = [...table.filter((m) => m.interval !== undefined).map(gateName), ...CLASS_METRICS.map((m) => classGateName(m.name, "class"))];
    throw new QualityInputError(`--fail-if: ${c.metric} has no interval to judge (in "${c.text}"); those with one: ${withOne.join(", ")}`);
  }
  if (c.min !== undefined && !d.support)
    throw new QualityInputError(`--fail-if: the verdict rests on no row count of its own (in "${c.text}"); put min N on the metrics it reads`);
}

/** What a command has to measure with: gold labels (`assess`, `report --gold`), an earlier run (`--compare`). */
export interface GateInputs {
  gold: boolean;
  compare: boolean;
  /** The command, for the message: "assess" or "report". */
  command: string;
  /** The metric table in use (default: assess's). */
  table?: readonly Metric[];
}

/**
 * Checks, before any answers are read, that every condition names a metric
 * that exists and that the command was given what it needs (gold labels, an
 * earlier run): one line naming the first that does not, exit 2.
 */
export function checkConditions(conditions: readonly Condition[], inputs: GateInputs): void {
  const table = inputs.table ?? METRIC_TABLE;
  const goldNames = [...table.map(gateName), ...CLASS_METRICS.map((m) => m.name)];
  for (const c of conditions) {
    if (c.metric === VERDICT_GATE.name) {
      if (c.option !== undefined) throw new QualityInputError(`--fail-if: the verdict (in "${c.text}") is not per class; drop ["${c.option}"]`);
      checkEvidence(c, table);
      continue;
    }
    const isClass = CLASS_METRICS.some((m) => m.name === c.metric);
    const drift = DRIFT_METRICS.find((m) => m.name === c.metric);
    if (!drift && !goldNames.includes(c.metric)) {
      const compared = DRIFT_METRICS.filter((m) => m.needs === "compare").map((m) => m.name);
      const own = DRIFT_METRICS.filter((m) => m.needs !== "compare").map((m) => m.name);
      const now = [...(inputs.gold ? goldNames : []), ...(inputs.compare ? compared : []), ...own, VERDICT_GATE.name];
      const more = [
        ...(inputs.compare ? [] : [`with --compare on ${compared.join(", ")}`]),
        ...(inputs.gold ? [] : [`with --gold on ${goldNames.join(", ")}`]),
      ];
      throw new QualityInputError(
        `--fail-if: no metric "${c.metric}" (in "${c.text}"); ${inputs.command} gates on ${now.join(", ")}${more.length ? `, ${more.join(", and ")}` : ""} (docs/metrics.md)`,
      );
    }
    if (isClass && c.option === undefined)
      throw new QualityInputError(`--fail-if: ${c.metric} (in "${c.text}") is per class; name the class: ${c.question ?? "question"}.${c.metric}["class"]`);
    if (!isClass && c.option !== undefined) throw new QualityInputError(`--fail-if: ${c.metric} (in "${c.text}") is not per class; drop ["${c.option}"]`);
    if (drift?.needs === "compare" && !inputs.compare)
      throw new QualityInputError(`--fail-if: ${c.metric} (in "${c.text}") compares two nights; add --compare <earlier answers>`);
    if (!drift && !inputs.gold) throw new QualityInputError(`--fail-if: ${c.metric} (in "${c.text}") measures against gold labels; add --gold <labels>`);
    checkEvidence(c, table);
  }
}

/** Every question and metric a condition names must exist: one line naming the first that does not. A bare metric checks the questions that have it. */
export function checkNames(subject: GateSubject, conditions: readonly Condition[]): void {
  const names = subject.questions.map((q) => q.name);
  for (const c of conditions) {
    const targets = c.question === undefined ? subject.questions : subject.questions.filter((q) => q.name === c.question);
    if (c.question !== undefined && targets.length === 0) {
      throw new QualityInputError(`--fail-if: no question "${c.question}" in "${c.text}"; the questions are ${names.join(", ")}`);
    }
    // Every question has a mark in the verdict.
    if (c.metric === VERDICT_GATE.name) continue;
    const key = conditionKey(c);
    for (const q of targets) {
      const known = subject.known(q.name);
      // A bare metric checks every question that has it (a bare weakest_recall skips a score question; a bare recall["yes"] the questions without that class).
      if (known.includes(key) || c.question === undefined) continue;
      const classes = known.filter((k) => k.startsWith(`${c.metric}[`));
      if (c.option !== undefined && classes.length > 0)
        throw new QualityInputError(
          `--fail-if: question ${q.name} has no class ${JSON.stringify(c.option)} (in "${c.text}"); its classes are ${classes.map((k) => k.slice(c.metric.length + 1, -1)).join(", ")}`,
        );
      throw new QualityInputError(
        `--fail-if: question ${q.name} has no metric "${c.option === undefined ? c.metric : key}" (in "${c.text}"); it has ${known.filter((k) => !k.includes("[")).join(", ")}`,
      );
    }
    if (c.question === undefined && !subject.questions.some((q) => subject.known(q.name).includes(key))) {
      const why = c.option !== undefined ? `the class ${JSON.stringify(c.option)}` : `the metric "${c.metric}"`;
      throw new QualityInputError(`--fail-if: no question has ${why} (in "${c.text}")`);
    }
  }
}

/** Whether `x` passes the comparison of `c`. */
function compares(x: number, c: Pick<Condition, "op" | "value">): boolean {
  return c.op === ">" ? x > c.value : c.op === "<" ? x < c.value : c.op === ">=" ? x >= c.value : x <= c.value;
}

/** The breaches: conditions that hold, one per question they hold for (`verdict` conditions: see verdictBreaches). */
export function breaches(subject: GateSubject, conditions: readonly Condition[]): Breach[] {
  checkNames(subject, conditions);
  const out: Breach[] = [];
  for (const c of conditions) {
    if (c.metric === VERDICT_GATE.name) continue;
    const key = conditionKey(c);
    for (const q of subject.questions) {
      if (c.question !== undefined && q.name !== c.question) continue;
      if (!(key in q.metrics)) continue;
      const actual = q.metrics[key] ?? NaN;
      const support = q.support?.[key];
      const range = q.intervals?.[key];
      // Judged on the interval: the bound on the condition's side, so the whole interval must clear the limit.
      const judged = c.interval ? (range ? (c.op.startsWith("<") ? range[0] : range[1]) : NaN) : actual;
      const thin = c.min !== undefined && !(support !== undefined && support >= c.min);
      if (compares(judged, c) || Number.isNaN(judged) || thin)
        out.push({
          condition: c,
          question: q.name,
          actual,
          ...(c.min !== undefined ? { support } : {}),
          ...(c.interval ? { range } : {}),
        });
    }
  }
  return out;
}

/** The `verdict` conditions that hold against the verdict's marks: one per question; a question marked n/a holds every one (nothing was measured). */
export function verdictBreaches(questions: readonly { name: string; mark: string }[], conditions: readonly Condition[]): Breach[] {
  const out: Breach[] = [];
  for (const c of conditions) {
    if (c.metric !== VERDICT_GATE.name) continue;
    for (const q of questions) {
      if (c.question !== undefined && q.name !== c.question) continue;
      const actual = (VERDICT_GATE.marks as readonly string[]).indexOf(q.mark);
      if (actual < 0 || compares(actual, c)) out.push({ condition: c, question: q.name, actual: actual < 0 ? NaN : actual, mark: q.mark });
    }
  }
  return out;
}

/** One line per breach, naming the question, the metric, its value (with its support or interval when the condition asks for them) and the limit. */
export function describeBreach(b: Breach, why?: string): string {
  return `${b.question}.${conditionKey(b.condition)} = ${breachValue(b, why)}, breaking ${b.condition.text}`;
}

/** A breach's figure as its line prints it: `0.5000 on 2 rows (under min 30)`, `0.8700 (95%: 0.8500–0.8900)`, `n/a (why)`, a mark. */
export function breachValue(b: Breach, why?: string): string {
  if (b.mark !== undefined) return b.mark === "n/a" ? "n/a (nothing beyond the answered rows was measured)" : b.mark;
  let value = Number.isNaN(b.actual) ? `n/a${why ? ` (${why})` : ""}` : formatActual(b.actual);
  const c = b.condition;
  if (c.interval) value += b.range ? ` (95%: ${formatActual(b.range[0])}–${formatActual(b.range[1])})` : " (no interval)";
  if (c.min !== undefined) {
    const support = b.support === undefined ? "on an unknown number of rows" : `on ${b.support.toLocaleString("en-US")} ${b.support === 1 ? "row" : "rows"}`;
    value += b.support !== undefined && b.support >= c.min ? ` ${support}` : ` ${support} (under min ${c.min.toLocaleString("en-US")})`;
  }
  return value;
}

function formatActual(x: number): string {
  return Math.abs(x) >= 0.001 || x === 0 ? x.toFixed(4) : x.toPrecision(3);
}

/** Why a breach's figure is n/a, for its line. */
export function breachWhy(b: Breach): string | undefined {
  const m = b.condition.metric;
  if (m === "label_mass") return "the answers carry no label mass";
  if (m === "agreement") return "no ids in both runs";
  if (b.condition.option !== undefined) return `no rows to count for ${JSON.stringify(b.condition.option)}`;
  return undefined;
}

/** A gate as the JSON and the pages record it: its conditions, and one line per breach. */
export interface GateRecord {
  conditions: string[];
  breaches: {
    question: string;
    metric: string;
    condition: string;
    /** The figure (null: it could not be computed); a `verdict` condition's is null, its mark under `mark`. */
    actual: number | null;
    mark?: string;
    support?: number;
    interval?: readonly [number, number];
    line: string;
  }[];
}

/** The record of a gate's breaches. */
export function gateRecord(conditions: readonly Condition[], found: readonly Breach[]): GateRecord {
  return {
    conditions: conditions.map((c) => c.text),
    breaches: found.map((b) => ({
      question: b.question,
      metric: conditionKey(b.condition),
      condition: b.condition.text,
      actual: Number.isNaN(b.actual) || b.mark !== undefined ? null : b.actual,
      ...(b.mark !== undefined ? { mark: b.mark } : {}),
      ...(b.support !== undefined ? { support: b.support } : {}),
      ...(b.range !== undefined ? { interval: b.range } : {}),
      line: describeBreach(b, breachWhy(b)),
    })),
  };
}
