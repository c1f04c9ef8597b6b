/**
 * Quality and drift gates: `--fail-if "urgent.ece>0.05,team.recall[\"billing\"]<0.6,psi>0.2"`
 * for `assess` and `report`. One parser and one checker; each command only
 * says which questions and metrics exist and what their values are.
 *
 * A per class metric names its class as a JSON string in brackets, so a
 * class with spaces, commas, dots, brackets or quotes in its name survives:
 * `team.recall["account access, login"]<0.6`.
 */
import { QualityInputError } from "./answers.js";
import { CLASS_METRICS, classGateName, DRIFT_METRICS, gateName, METRIC_TABLE, type Metric } from "./metric-table.js";

/** A gate condition: `question.metric` (or a bare `metric`: every question), a class for a per class metric, compared with a number. */
export interface Condition {
  /** Undefined: the metric of every question. */
  question?: string | undefined;
  metric: string;
  /** The class of a per class metric (`recall["billing"]`). */
  option?: string | undefined;
  op: ">" | "<" | ">=" | "<=";
  value: number;
  text: string;
}

/** The key a condition reads in a question's metrics: `ece`, or `recall["billing"]`. */
export const conditionKey = (c: Pick<Condition, "metric" | "option">) => (c.option === undefined ? c.metric : classGateName(c.metric, c.option));

/** A condition that holds for one question: a breach. */
export interface Breach {
  condition: Condition;
  question: string;
  /** NaN when the figure could not be computed (a breach too: a gate fails closed). */
  actual: number;
}

/** What a gate checks against: each question's metrics by gate key (undefined: the metric does not exist for that question). */
export interface GateSubject {
  questions: { name: string; metrics: Record<string, number | undefined> }[];
  /** Keys a metric may take, for the message when one is unknown. */
  known: (question: string) => string[];
}

const HOW = `write question.metric>number, metric>number (every question) or question.recall["class"]<number, e.g. urgent.ece>0.05,team.recall["billing"]<0.6`;

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

function parseCondition(part: string): Condition {
  const fail = () => new QualityInputError(`--fail-if: cannot read "${part}"; ${HOW}`);
  const found = operatorAt(part);
  if (!found) throw fail();
  const rhs = part.slice(found.at + found.op.length).trim();
  if (!/^-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?$/i.test(rhs) || !Number.isFinite(Number(rhs))) throw fail();
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
  return { question: m[1], metric: m[2] as string, option, op: found.op, value: Number(rhs), text: part };
}

/** Parses `--fail-if "urgent.ece>0.05,team.recall[\"billing\"]<0.6,agreement<0.9"`. */
export function parseConditions(text: string): Condition[] {
  return splitConditions(text).map(parseCondition);
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
    const isClass = CLASS_METRICS.some((m) => m.name === c.metric);
    const drift = DRIFT_METRICS.find((m) => m.name === c.metric);
    if (!drift && !goldNames.includes(c.metric)) {
      const compared = DRIFT_METRICS.filter((m) => m.needs === "compare").map((m) => m.name);
      const own = DRIFT_METRICS.filter((m) => m.needs !== "compare").map((m) => m.name);
      const now = [...(inputs.gold ? goldNames : []), ...(inputs.compare ? compared : []), ...own];
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
  }
}

/** Every question and metric a condition names must exist: one line naming the first that does not. */
export function checkNames(subject: GateSubject, conditions: readonly Condition[]): void {
  const names = subject.questions.map((q) => q.name);
  for (const c of conditions) {
    const targets = c.question === undefined ? subject.questions : subject.questions.filter((q) => q.name === c.question);
    if (c.question !== undefined && targets.length === 0) {
      throw new QualityInputError(`--fail-if: no question "${c.question}" in "${c.text}"; the questions are ${names.join(", ")}`);
    }
    const key = conditionKey(c);
    for (const q of targets) {
      const known = subject.known(q.name);
      if (known.includes(key)) continue;
      const classes = known.filter((k) => k.startsWith(`${c.metric}[`));
      // A bare per class metric checks every question that has the class: a question without it is not an error.
      if (c.option !== undefined && c.question === undefined && known.some((k) => k.startsWith(`${c.metric}[`))) continue;
      if (c.option !== undefined && classes.length > 0)
        throw new QualityInputError(
          `--fail-if: question ${q.name} has no class ${JSON.stringify(c.option)} (in "${c.text}"); its classes are ${classes.map((k) => k.slice(c.metric.length + 1, -1)).join(", ")}`,
        );
      if (c.option !== undefined && c.question === undefined) continue;
      throw new QualityInputError(
        `--fail-if: question ${q.name} has no metric "${c.option === undefined ? c.metric : key}" (in "${c.text}"); it has ${known.filter((k) => !k.includes("[")).join(", ")}`,
      );
    }
    if (c.option !== undefined && c.question === undefined && !subject.questions.some((q) => subject.known(q.name).includes(key)))
      throw new QualityInputError(`--fail-if: no question has the class ${JSON.stringify(c.option)} (in "${c.text}")`);
  }
}

/** The breaches: conditions that hold, one per question they hold for. */
export function breaches(subject: GateSubject, conditions: readonly Condition[]): Breach[] {
  checkNames(subject, conditions);
  const out: Breach[] = [];
  for (const c of conditions) {
    const key = conditionKey(c);
    for (const q of subject.questions) {
      if (c.question !== undefined && q.name !== c.question) continue;
      if (!(key in q.metrics)) continue;
      const actual = q.metrics[key] ?? NaN;
      const holds = c.op === ">" ? actual > c.value : c.op === "<" ? actual < c.value : c.op === ">=" ? actual >= c.value : actual <= c.value;
      if (holds || Number.isNaN(actual)) out.push({ condition: c, question: q.name, actual });
    }
  }
  return out;
}

/** One line per breach, naming the question, the metric, its value and the limit. */
export function describeBreach(b: Breach, why?: string): string {
  const c = b.condition;
  const value = Number.isNaN(b.actual) ? `n/a${why ? ` (${why})` : ""}` : formatActual(b.actual);
  return `${b.question}.${conditionKey(c)} = ${value}, breaking ${c.text}`;
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
  breaches: { question: string; metric: string; condition: string; actual: number | null; line: string }[];
}

/** The record of a gate's breaches. */
export function gateRecord(conditions: readonly Condition[], found: readonly Breach[]): GateRecord {
  return {
    conditions: conditions.map((c) => c.text),
    breaches: found.map((b) => ({
      question: b.question,
      metric: conditionKey(b.condition),
      condition: b.condition.text,
      actual: Number.isNaN(b.actual) ? null : b.actual,
      line: describeBreach(b, breachWhy(b)),
    })),
  };
}
