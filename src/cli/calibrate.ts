import { DEFAULT_TIMEOUT_MS } from "../evaluator/remote.js";
import { existsSync, readFileSync } from "node:fs";
import type { Argv, CommandModule } from "yargs";
import { loadJob } from "../records/job.js";
import { isSummary } from "../records/usage.js";
import { readAnswers, type QuestionInfo } from "../quality/answers.js";
import { joinGold, Rows } from "../quality/assess.js";
import type { CalibrationFile, FittedQuestion } from "../calibration/file.js";
import { favourSize, jobQuestions } from "./assess.js";
import { classify, VerdictError } from "../api/verdict.js";
import { UsageError } from "./exit.js";
import { AuthenticationError, PermissionDeniedError, TypedEvalError, UpstreamUnavailableError } from "../api/errors.js";
import { checkWritable, writeFileAtomic } from "./files.js";
import { extensionsText } from "../records/formats.js";
import { numeric } from "./checks.js";
import { duration } from "./duration.js";
import { withModelOptions } from "./model-options.js";
import type { ArgsOf } from "./args.js";
import { openEvaluator } from "../runner/prepare.js";
import { modelOpener } from "./run.js";
import { batchFlattens, movement } from "../calibration/maps.js";
import { batchQuestion, contextualMaps } from "../calibration/label-free.js";
import { fitQuestion } from "../quality/calibrate.js";

const METHODS = ["auto", "temperature", "platt", "batch", "contextual"] as const;

/** The model identity and versioned id a run's answers came from, from the usage summary beside them. */
function answersIdentity(answers: string): { identity: string | null; model: string | null } {
  const path = `${answers}.usage.json`;
  if (!existsSync(path)) return { identity: null, model: null };
  try {
    const json: unknown = JSON.parse(readFileSync(path, "utf8"));
    if (isSummary(json)) return { identity: json.model_identity ?? null, model: json.model };
  } catch {
    // Unreadable: treated as unknown, and said so below.
  }
  return { identity: null, model: null };
}

/** Every answered row's distributions (raw when the run calibrated), for the methods that need no gold. */
async function allRows(answers: string, questions: QuestionInfo[] | undefined): Promise<{ questions: QuestionInfo[]; rows: Map<string, Rows> }> {
  let found = questions;
  const rows = new Map<string, Rows>();
  for await (const row of await readAnswers(answers, { questions, onQuestions: (q) => (found = q) })) {
    for (const q of found ?? []) {
      let r = rows.get(q.name);
      if (!r) rows.set(q.name, (r = new Rows(q.labels.length)));
      r.push(row.raw?.get(q.name) ?? (row.dist.get(q.name) as number[]), 0, -1, row.id);
    }
  }
  return { questions: found ?? [], rows };
}

/** Each label's share of a question's gold rows. */
function labelShares(rows: Rows): number[] {
  const count = new Array<number>(rows.k).fill(0);
  for (let i = 0; i < rows.n; i++) count[rows.y[i] as number]! += 1;
  return count.map((c) => c / rows.n);
}

/** The map in words, each part once: "temperature 1.935", "platt: temperature 1.2, bias ...", "batch: bias ...". */
export function mapText(q: Pick<FittedQuestion, "method" | "temperature" | "bias">): string {
  const bias = `bias ${q.bias.map((b) => b.toFixed(2)).join(" ")}`;
  switch (q.method) {
    case "none":
      return "none (no map beat the raw answers on held-out rows)";
    case "temperature":
      return `temperature ${q.temperature.toFixed(3)}`;
    case "platt":
      return `platt: temperature ${q.temperature.toFixed(3)}, ${bias}`;
    default:
      return `${q.method}: ${bias}`;
  }
}

function describeFit(name: string, q: FittedQuestion): string {
  const f = (x: number | undefined) => (x === undefined ? "n/a" : x.toFixed(3));
  let line = `${name} (${q.type}${q.rows !== undefined ? `, ${q.rows} rows` : ""}): ${mapText(q)}`;
  const cv = q.cross_validation;
  if (cv) {
    const none = cv.held_out.none;
    const chosen = cv.held_out[q.method];
    line += `\n  held out (${cv.folds}-fold): log loss ${f(none?.log_loss)} -> ${f(chosen?.log_loss)}, ECE ${f(none?.ece)} -> ${f(chosen?.ece)}, Brier ${f(none?.brier)} -> ${f(chosen?.brier)}, accuracy ${f(none?.accuracy)} -> ${f(chosen?.accuracy)}`;
    const others = Object.entries(cv.held_out).filter(([m]) => m !== "none" && m !== q.method);
    if (others.length) line += `\n  also tried: ${others.map(([m, h]) => `${m} (log loss ${f(h?.log_loss)}, ECE ${f(h?.ece)})`).join(", ")}`;
  }
  if (q.moved !== undefined) line += `\n  moved the mean label distribution by ${(q.moved * 100).toFixed(1)}% (total variation)`;
  return line;
}

/**
 * Contextual calibration's remote failures as one line and the exit code a
 * scheduler acts on: 3 (rerun later) when the endpoint is down, busy or
 * refuses the key, 2 when it rejects the request itself (the job or flags
 * need fixing).
 */
function remoteFailure(error: TypedEvalError, where: string, keyEnv: string): VerdictError {
  const why = `contextual calibration asked ${where} the content-free states`;
  // The verdict (aborted, resumable; or the request's own fault) is the classifier's; the words say what to do here.
  const { verdict } = classify(error, "command");
  if (error instanceof UpstreamUnavailableError)
    return new VerdictError(verdict, `${why} and got no answer (${error.message}): check --base-url and that the endpoint is up, then rerun`);
  if (error instanceof AuthenticationError || error instanceof PermissionDeniedError)
    return new VerdictError(
      verdict,
      `${why}; it refused the key in $${keyEnv} (HTTP ${error.status}: ${error.message}): set it, or --api-key-env, to a key it accepts`,
    );
  if (error.retryable) return new VerdictError(verdict, `${why}; it failed with HTTP ${error.status} (${error.message}): rerun later`);
  return new VerdictError(
    verdict,
    `${why}; it rejected the request with HTTP ${error.status} (${error.message}): check that --job and the model name match what the endpoint serves`,
  );
}

function withCalibrateOptions<T>(y: Argv<T>) {
  return withModelOptions(y)
    .positional("answers", { type: "string", demandOption: true, describe: `answers a run wrote (${extensionsText()}): a path or s3://bucket/key` })
    .option("gold", {
      type: "string",
      describe:
        "gold labels (JSONL, CSV, Parquet, or a Label Studio JSON export); needed by auto, temperature and platt; with batch, checks that a question's skew is not real",
    })
    .option("job", { alias: "j", type: "string", describe: "the job file (needed by contextual; gives option order and the id field)" })
    .option("method", {
      choices: METHODS,
      default: "auto" as const,
      describe: "auto: the best of temperature and platt by held-out log loss; batch and contextual need no gold",
    })
    .option("folds", numeric("folds", { integer: true, min: 2, max: 100 }, { default: 5, describe: "cross-validation folds" }))
    .option("seed", numeric("seed", { integer: true }, { default: 1, describe: "seed of the fold split" }))
    .option("output", { alias: "o", type: "string", demandOption: true, describe: "where to write the calibration file (JSON)" })
    .option("id-field", { type: "string", describe: "gold field holding the record id (default: id, else the job's id field)" })
    .option("allow-unmatched", { type: "boolean", default: false, describe: "fit even when some gold ids are not in the answers" })
    .option("force", {
      type: "boolean",
      default: false,
      describe: "batch: write the calibration even where it would flatten a skewed question (see --gold)",
    })
    .option("base-url", {
      type: "string",
      defaultDescription: "$TYPED_EVAL_BASE_URL",
      describe: "contextual: ask a remote /v1/systemone endpoint instead of the embedded model",
    })
    .option("api-key-env", { type: "string", default: "TYPED_EVAL_API_KEY", describe: "environment variable holding the remote endpoint's key" })
    .option("api-key", { type: "boolean", default: true, describe: "--no-api-key: the remote endpoint needs no key" })
    .option(
      "timeout",
      duration("timeout", { above: 0 }, { default: `${DEFAULT_TIMEOUT_MS / 1000}s`, describe: "contextual: how long to wait for a remote answer" }),
    );
}

/** `typed-eval calibrate`: fit a calibration from gold labels (or without them) for `run --calibration`. */
export const calibrateCommand: CommandModule<object, ArgsOf<typeof withCalibrateOptions>> = {
  command: "calibrate <answers>",
  describe: "Fit a calibration on a run's answers (gold labels, or batch/contextual without them) for run --calibration",
  builder: withCalibrateOptions,
  handler: async (args) => {
    const fitted = args.method === "auto" || args.method === "temperature" || args.method === "platt";
    if (fitted && !args.gold)
      throw new UsageError(`--method ${args.method} fits on gold labels: pass --gold (or use --method batch or contextual, which need none)`);
    if (args.method === "contextual" && !args.job) throw new UsageError("--method contextual asks the job's questions of content-free states: pass --job");
    checkWritable(args.output, "--output");
    favourSize();
    const { questions, idField } = jobQuestions(args.job);
    let { identity, model } = answersIdentity(args.answers);
    const warnings: string[] = [];
    const out: CalibrationFile = {
      kind: "typed-eval.calibration",
      version: 1,
      identity,
      model,
      created: new Date().toISOString(),
      fitted_on: { answers: args.answers, ...(args.gold ? { gold: args.gold } : {}) },
      questions: {},
    };
    if (fitted) {
      const joined = await joinGold(args.answers, args.gold as string, {
        questions,
        idField: args["id-field"],
        jobIdField: idField,
        raw: true,
        allowUnmatched: args["allow-unmatched"],
      });
      for (const q of joined.questions) {
        const rows = joined.rows.get(q.name) as Rows;
        if (rows.n === 0) continue;
        out.questions[q.name] = fitQuestion(q, rows, { method: args.method as "auto" | "temperature" | "platt", folds: args.folds, seed: args.seed });
      }
    } else if (args.method === "batch") {
      const all = await allRows(args.answers, questions);
      // Gold labels, when given, say whether a question's skew is real.
      const gold = args.gold
        ? await joinGold(args.answers, args.gold, { questions, idField: args["id-field"], jobIdField: idField, allowUnmatched: args["allow-unmatched"] })
        : undefined;
      const flattened: string[] = [];
      for (const q of all.questions) {
        const rows = all.rows.get(q.name);
        if (!rows || rows.n === 0) continue;
        const fitted = batchQuestion(q, rows.scored().p, q.labels.length);
        const goldRows = gold?.rows.get(q.name);
        const goldShares = goldRows && goldRows.n > 0 ? labelShares(goldRows) : undefined;
        const why = batchFlattens(q.name, fitted.shares_before ?? [], fitted.shares_after ?? [], goldShares);
        if (why) flattened.push(why);
        out.questions[q.name] = fitted;
      }
      if (flattened.length > 0 && !args.force) {
        throw new UsageError(
          `${flattened.join("; ")}; nothing written: ${args.gold ? "leave such a question out of batch calibration" : "pass --gold with labels to check the skew against"}, or --force to write it anyway`,
        );
      }
      for (const why of flattened) warnings.push(`warning: ${why} (written anyway: --force)`);
    } else {
      const job = loadJob(args.job as string);
      if (args.model !== "default") job.model = args.model;
      const endpoint = {
        baseUrl: args["base-url"],
        apiKeyEnv: args["api-key-env"],
        noApiKey: args["api-key"] === false,
        timeoutSeconds: args.timeout,
        modelsFile: args["models-file"],
        jobFile: args.job as string,
      };
      const { evaluator } = await openEvaluator(endpoint, job, modelOpener(args));
      try {
        const runIdentity = evaluator.identity(job.model);
        if (identity !== null && identity !== runIdentity) {
          throw new UsageError(
            `${args.answers} came from ${identity}, but the model asked here is ${runIdentity}: contextual calibration must ask the model that answered`,
          );
        }
        identity = runIdentity;
        out.identity = identity;
        let maps: Awaited<ReturnType<typeof contextualMaps>>["maps"];
        try {
          ({ maps } = await contextualMaps(
            job.questions,
            async (state) => (await evaluator.evaluate({ state, model: job.model, questions: job.questions })).response.answers,
          ));
        } catch (error) {
          if (!(error instanceof TypedEvalError)) throw error;
          throw remoteFailure(error, args["base-url"] ?? "the model", args["api-key-env"]);
        }
        const all = await allRows(args.answers, questions);
        for (const [name, map] of Object.entries(maps)) {
          const rows = all.rows.get(name);
          out.questions[name] = rows && rows.n > 0 ? { ...map, rows: rows.n, ...movement(rows.scored().p, rows.k, map) } : map;
        }
      } finally {
        await evaluator.close();
      }
    }
    if (Object.keys(out.questions).length === 0) throw new UsageError("nothing to calibrate: no question has rows");
    writeFileAtomic(args.output, `${JSON.stringify(out, null, 2)}\n`);
    const lines = [...Object.entries(out.questions).map(([name, q]) => describeFit(name, q)), ...warnings];
    if (identity === null)
      lines.push(`warning: no model identity is known for ${args.answers} (no usage file beside it): run --calibration will need --force-calibration`);
    lines.push(`calibration: ${args.output}`);
    process.stdout.write(`${lines.join("\n")}\n`);
  },
};
