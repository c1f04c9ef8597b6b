/**
 * What `assess` and `report` measure, one flow for both: the assessment when
 * gold labels are given, the run report when it is asked for (always for
 * `report`; for `assess` with --compare or a gate on the answers' own
 * metrics), then the gate and the verdict. The commands differ only in what
 * they print first.
 */
import { type Assessment, assess, type JoinOptions } from "./assess.js";
import { breaches, type Breach, checkConditions, type Condition, gateRecord, type GateRecord, verdictBreaches } from "./gate.js";
import type { Metric } from "./metric-table.js";
import { type RunReport, runReport } from "./report.js";
import type { Suspects } from "./suspects.js";
import { buildVerdict, gateSubject, type Verdict } from "./verdict.js";

export interface MeasureOptions extends JoinOptions {
  answers: string;
  gold?: string | undefined;
  compare?: string | undefined;
  /** The run report even without --compare (the `report` command). */
  report?: boolean;
  errors?: string | undefined;
  usage?: string | undefined;
  job?: string | undefined;
  seed?: number;
  bootstrap?: number;
  suspects?: Suspects | undefined;
  conditions?: readonly Condition[];
  metrics?: readonly Metric[];
}

export interface Measured {
  assessment?: Assessment | undefined;
  report?: RunReport | undefined;
  breaches: Breach[];
  gate?: GateRecord | undefined;
  verdict: Verdict;
}

/** Checks the gate's names against what the command was given, before any answers are read (exit 2 names the first that cannot be measured). */
export function checkGate(conditions: readonly Condition[], options: { gold: boolean; compare: boolean; command: string; metrics?: readonly Metric[] }): void {
  checkConditions(conditions, {
    gold: options.gold,
    compare: options.compare,
    command: options.command,
    ...(options.metrics ? { table: options.metrics } : {}),
  });
}

/** Measures what the options ask for, gates it and judges it. */
export async function measure(o: MeasureOptions): Promise<Measured> {
  const conditions = o.conditions ?? [];
  const assessment = o.gold
    ? await assess(o.answers, o.gold, {
        questions: o.questions,
        idField: o.idField,
        jobIdField: o.jobIdField,
        raw: o.raw ?? false,
        allowUnmatched: o.allowUnmatched ?? false,
        seed: o.seed ?? 1,
        bootstrap: o.bootstrap ?? 200,
        suspects: o.suspects,
        job: o.job,
        errors: o.errors,
        usage: o.usage,
        ...(o.metrics ? { metrics: o.metrics } : {}),
      })
    : undefined;
  const wantsReport = o.report || o.compare !== undefined || conditions.some((c) => c.metric === "label_mass");
  const report = wantsReport
    ? await runReport(o.answers, { questions: o.questions, compare: o.compare, errors: o.errors, usage: o.usage, job: o.job })
    : undefined;
  const found = breaches(gateSubject(assessment, report, o.metrics), conditions);
  const verdict = buildVerdict({ assessment, report, breaches: found });
  // A gate on the verdict reads the marks the other conditions' breaches helped make.
  found.push(...verdictBreaches(verdict.questions, conditions));
  const gate = conditions.length > 0 ? gateRecord(conditions, found) : undefined;
  if (report && gate) report.gate = gate;
  return { assessment, report, breaches: found, gate, verdict };
}
