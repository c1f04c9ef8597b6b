/**
 * What `run`, `estimate` and `calibrate` set up before any record is read:
 * the job, the source, the evaluator (embedded or remote), price, shard and
 * concurrency, and for `run` where everything goes. Options and environment
 * defaults are read here, once, so every command resolves them alike.
 */
import { refuseOtherKinds } from "../records/file-kind.js";
import { createHash } from "node:crypto";
import { dirname, basename, resolve } from "node:path";
import { InvocationError } from "../api/errors.js";
import { env, secret, type EnvName } from "../api/env.js";
import type { Evaluator } from "../evaluator/evaluator.js";
import { endpointEvaluator } from "../evaluator/factory.js";
import { refuseOffWire } from "../evaluator/remote.js";
import { questionLabels } from "../calibration/maps.js";
import type { Logger } from "../logging/logger.js";
import { ModelRegistry, RegistryError, type ModelEntry } from "../models/registry.js";
import { calibrationFor, loadCalibration } from "../calibration/file.js";
import { checkFirstRecord } from "./check.js";
import { loadJob, parseShare, type Job } from "../records/job.js";
import { fieldsRead, parseShard, prepareItem, type Shard } from "./input/requests.js";
import { firstRecords, sampleRecords } from "./input/selection.js";
import { extensionOf, inputFormat, outputFormat, type FileFormat } from "../records/formats.js";
import type { FormatSettings } from "../records/format.js";
import { openLocalSource } from "../records/sources.js";
import { openS3Source } from "../records/s3-source.js";
import type { Source } from "../records/source.js";
import { localTarget, type OutputPolicy, type OutputTarget } from "./output/outputs.js";
import { s3Target } from "./output/s3-target.js";
import { isS3, refuseMistypedS3 } from "../records/s3.js";
import { besideOutput } from "../records/companions.js";
import { reviewThresholds } from "./output/review.js";

/** The environment variable that names a remote endpoint when --base-url is not given. */
export const BASE_URL_ENV = "TYPED_EVAL_BASE_URL" satisfies EnvName;

/** How a job reaches its model: the embedded one, or a remote endpoint with its key. */
export interface EndpointSettings {
  /** A remote /v1/systemone endpoint; undefined: the embedded model. `$TYPED_EVAL_BASE_URL` when not given. */
  baseUrl?: string | undefined;
  /** The variable holding the remote endpoint's key. */
  apiKeyEnv: string;
  /** A remote endpoint without a key is intended (a local server with auth off). */
  noApiKey?: boolean | undefined;
  /** Seconds per remote attempt. */
  timeoutSeconds: number;
  modelsFile?: string | undefined;
  /** The job file, for messages. */
  jobFile: string;
}

/** Everything `run` and `estimate` read from their options. */
export interface JobSettings extends EndpointSettings {
  input: string;
  /** A registered format's name (`--format`); by default each input's extension says. */
  format?: string | undefined;
  /** The format options given for reading (`--csv-delimiter`), by flag. */
  formats?: FormatSettings | undefined;
  /** A --model override, or "default" for the job's. */
  model: string;
  shard?: string | undefined;
  price?: number | undefined;
  concurrency?: number | undefined;
  limit?: number | undefined;
  sample?: number | undefined;
  seed: number;
}

/** Opens an embedded model by name (the CLI's, with its download progress). */
export type OpenModel = (model: string) => Promise<Evaluator>;

/** The base URL from the option, else from the environment. */
export function baseUrlOf(given: string | undefined): string | undefined {
  return given ?? env(BASE_URL_ENV);
}

/** An empty or non-HTTP base URL is a mistake (an unset variable in `--base-url $TYPED_EVAL_BASE_URL`), never "use the embedded model". */
export function checkBaseUrl(baseUrl: string | undefined): void {
  if (baseUrl === undefined) return;
  if (baseUrl.trim() === "")
    throw new InvocationError(
      "--base-url is empty (is the variable it came from set?): pass an endpoint such as https://host, or leave the flag out to use the embedded model",
    );
  if (!/^https?:\/\/[^/]/i.test(baseUrl)) throw new InvocationError(`--base-url takes an http:// or https:// URL, not ${JSON.stringify(baseUrl)}`);
}

/** The job file, with the --model override. */
export function readJob(jobFile: string, model: string): Job {
  const job: Job = loadJob(jobFile);
  if (model !== "default") job.model = model;
  return job;
}

/** The evaluator a job runs on: the remote endpoint of the base URL (option or environment), else the job's model embedded. */
export async function openEvaluator(
  settings: EndpointSettings,
  job: Job,
  openModel: OpenModel,
): Promise<{ evaluator: Evaluator; entry: ModelEntry | undefined; remote: boolean }> {
  const registry = ModelRegistry.load({ file: settings.modelsFile });
  const entry = registry.find(job.model);
  const baseUrl = baseUrlOf(settings.baseUrl);
  checkBaseUrl(baseUrl);
  if (baseUrl) {
    // --no-api-key sends none (and `estimate`, which sends nothing, reads none: a malformed key does not stop a count).
    const apiKey = settings.noApiKey ? undefined : secret(settings.apiKeyEnv);
    if (!apiKey && !settings.noApiKey) {
      throw new InvocationError(
        `$${settings.apiKeyEnv} is not set, and ${baseUrl} is a remote endpoint: set it to the endpoint's key, or pass --no-api-key if the endpoint needs none`,
      );
    }
    // Before the first request: a question of a type registered in process cannot travel to a remote endpoint.
    refuseOffWire(job.questions, baseUrl);
    return { evaluator: endpointEvaluator({ baseUrl, apiKey, timeoutMs: settings.timeoutSeconds * 1000 }), entry, remote: true };
  }
  if (!entry)
    throw new RegistryError(
      `unknown model "${job.model}" in ${settings.jobFile}; known: ${registry.names().join(", ")} (or pass --base-url for a remote model)`,
    );
  return { evaluator: await openModel(job.model), entry, remote: false };
}

/** The input, as a source with --limit or --sample applied. */
export async function openSource(settings: JobSettings, job: Job, logger: Logger): Promise<Source> {
  const fields = fieldsRead(job);
  // `S3://...` read as a local path would be absent (exit 6, "skipped"): named as what it meant, for estimate and calibrate too.
  refuseMistypedS3(settings.input, "the input");
  // A file typed-eval wrote that holds no records (a run's errors, journal or summary): refused by name, not answered line by line.
  refuseOtherKinds(settings.input, ["answers"], "records to answer");
  const reading = { settings: settings.formats ?? {}, warn: (message: string) => logger.warn({ input: settings.input }, message), takesOptions: true };
  let source: Source = isS3(settings.input)
    ? await openS3Source(settings.input, settings.format, { fields, reading, onNote: (message, keys) => logger.info({ skipped: keys }, message) })
    : openLocalSource(settings.input, inputFormat(settings.input, settings.format), { fields, reading });
  if (settings.limit !== undefined) source = firstRecords(source, settings.limit);
  if (settings.sample !== undefined) source = sampleRecords(source, settings.sample, settings.seed);
  return source;
}

/**
 * What `run` and `estimate` both set up: job, source, evaluator, price, shard.
 * `beforeModel` runs once the input is open and the flags are checked, before
 * a model is loaded (or downloaded).
 */
export async function prepareJob(
  settings: JobSettings,
  logger: Logger,
  openModel: OpenModel,
  job: Job = readJob(settings.jobFile, settings.model),
  beforeModel?: () => void | Promise<void>,
) {
  const shard: Shard | undefined = settings.shard ? parseShard(settings.shard) : undefined;
  // The input's first record before any model loads: a corrupt .gz is told in a second, not after a download.
  const source = await checkFirstRecord(await openSource(settings, job, logger));
  checkBaseUrl(baseUrlOf(settings.baseUrl));
  await beforeModel?.();
  return { job, shard, source, ...(await openModelFor(settings, job, openModel)) };
}

/** The evaluator a job runs on, with its price per million input tokens and the concurrency it defaults to. */
export async function openModelFor(settings: JobSettings, job: Job, openModel: OpenModel) {
  const { evaluator, entry, remote } = await openEvaluator(settings, job, openModel);
  // An embedded model knows its price (0 for a file the registry does not know); a remote one costs the hosted price unless told.
  const price = settings.price ?? evaluator.pricePerMillion?.(job.model) ?? (remote ? 0.042 : (entry?.price_per_million_input_tokens ?? 0.042));
  const concurrency = settings.concurrency ?? (remote ? 32 : 4);
  return { evaluator, price, concurrency };
}

/** The prompt text of the first record that makes a request (shard and bad records skipped). */
export async function firstPrompt(job: Job, source: Source, evaluator: Evaluator, shard: Shard | undefined): Promise<string> {
  if (!evaluator.promptText) throw new InvocationError("--print-prompt shows the embedded model's prompt; a remote endpoint renders its own");
  for await (const item of source.items) {
    const prepared = prepareItem(job, item, shard);
    if (prepared.kind !== "request") continue;
    return `# line ${item.line} of ${item.source}, id ${prepared.id}\n${evaluator.promptText(prepared.request)}`;
  }
  throw new InvocationError(`${source.name} holds no record that makes a request (see typed-eval run without --print-prompt for the reasons)`);
}

/** Where a run's outputs go, from its options. */
export interface RunPlaces {
  output?: string | undefined;
  /** A registered format's name (`--output-format`); by default the output's extension says. */
  outputFormat?: string | undefined;
  errors?: string | undefined;
  journal?: string | undefined;
  summaryJson?: string | undefined;
}

/** Every place a run reads or writes, resolved once. */
export interface RunPaths {
  output: string;
  /** The prefix of the errors, usage and review files. */
  sidecar: string;
  /** Failed records; undefined for `-o -` without --errors (nothing is dropped in the working directory: the journal keeps them). */
  errors: string | undefined;
  usage: string | undefined;
  summaryJson: string | undefined;
  /** The local journal file (for an S3 journal, its local copy). */
  journalPath: string;
  /** The S3 prefix the journal is mirrored to, if any. */
  remoteJournal: string | undefined;
  /** What the journal is bound to: a resolved path, an S3 location or "stdin". */
  inputId: string;
  /**
   * A stdin-to-stdout run's journal (under .typed-eval/, named from the
   * stream's first records by `streamJournal`): kept only until its run is
   * done, since the next stream is another input and its answers went down
   * the pipe.
   */
  transient: boolean;
}

/** Resolves where a run writes (`-o` default, sidecars, the journal beside the output or under .typed-eval/). */
export function runPaths(settings: Pick<JobSettings, "input" | "jobFile" | "shard">, places: RunPlaces): RunPaths {
  const input = settings.input;
  const inputName = input === "-" ? "stdin" : basename(input).replace(/(\.[^.]+)?(\.gz)?$/i, "");
  const output = places.output ?? (input === "-" ? "-" : `out/${basename(settings.jobFile).replace(/\.json$/, "")}-${inputName}.jsonl`);
  const sidecar = output === "-" ? "typed-eval" : output;
  const journalLocation = places.journal ?? (isS3(output) ? `${output}.journal/` : defaultJournal(settings, output));
  const remoteJournal = isS3(journalLocation) ? journalLocation : undefined;
  return {
    output,
    sidecar,
    errors: places.errors ?? (output === "-" ? undefined : besideOutput(sidecar, "errors")),
    usage: output === "-" ? undefined : besideOutput(output, "usage"),
    summaryJson: places.summaryJson,
    journalPath: remoteJournal ? defaultJournal(settings, output, remoteJournal) : journalLocation,
    remoteJournal,
    inputId: input === "-" ? "stdin" : isS3(input) ? input : resolve(input),
    transient: input === "-" && output === "-" && places.journal === undefined,
  };
}

/**
 * The journal of a stdin-to-stdout run, named from the stream's first
 * records (those the check read) as well as the job and shard: the same
 * stream piped again after a crash resumes its journal; tonight's stream is
 * not taken for last night's (which had reported last night's records as
 * gone and added its spending to tonight's). Kept until its run is done.
 */
export function streamJournal(settings: Pick<JobSettings, "jobFile" | "shard">, paths: RunPaths, first: readonly unknown[]): RunPaths {
  if (!paths.transient) return paths;
  const key = createHash("sha256")
    .update(JSON.stringify([resolve(settings.jobFile), "stdin", "-", settings.shard ?? ""]))
    .update(JSON.stringify(first))
    .digest("hex")
    .slice(0, 16);
  return { ...paths, journalPath: `.typed-eval/journal-stdin-${key}.jsonl` };
}

/**
 * The journal's default place: beside a path output, else in .typed-eval/
 * under a name unique to the job (for an S3 journal, the local copy it is
 * pulled into and shipped from).
 */
function defaultJournal(settings: Pick<JobSettings, "input" | "jobFile" | "shard">, output: string, remote?: string): string {
  if (output !== "-" && !isS3(output) && !remote) return `${output}.journal`;
  const key = createHash("sha256")
    .update(JSON.stringify([resolve(settings.jobFile), settings.input, output, settings.shard ?? "", ...(remote ? [remote] : [])]))
    .digest("hex")
    .slice(0, 16);
  return `.typed-eval/journal-${key}.jsonl`;
}

/** The answers' format: `--output-format`, else the output's extension; one no format has is refused (exit 2), in the check stage. */
export function answersFormatOf(output: string, places: Pick<RunPlaces, "outputFormat">): FileFormat {
  return outputFormat(output, { explicit: places.outputFormat, flag: "--output-format", what: "the answers" });
}

/** A path, stdout ("-") or an S3 location as an output target. */
export function targetOf(location: string): OutputTarget {
  return isS3(location) ? s3Target(location) : localTarget(location);
}

/** Calibration, review routing and CSV options of a run, with the file its review rows go to. */
export type RunShaping = OutputPolicy & { calibrationSource?: string | undefined; reviewFile?: string | undefined };

/** The options that shape a run's outputs. */
export interface ShapingSettings {
  calibration?: string | undefined;
  forceCalibration: boolean;
  reviewBelow?: number | undefined;
  auditSample?: string | undefined;
  auditSeed: number;
  /** The format options given for writing (`--csv-bom`, `--csv-escape-formulas`), by flag. */
  formats: FormatSettings;
}

/**
 * Calibration and review routing from the options and the job file (options
 * win), checked before any model is loaded; `verify` then checks the
 * calibration's model identity against the evaluator the run opened.
 */
export function outputPolicy(
  settings: ShapingSettings,
  jobFile: string,
  job: Job,
  paths: Pick<RunPaths, "sidecar"> & { answersFormat: FileFormat },
  logger: Logger,
): { policy: RunShaping; verify(evaluator: Evaluator): void } {
  const policy: RunShaping = { formats: settings.formats };
  let verify: (evaluator: Evaluator) => void = () => {};
  const calibration =
    settings.calibration ?? (job.calibration === undefined ? undefined : job.calibration === "batch" ? "batch" : resolve(dirname(jobFile), job.calibration));
  if (calibration === "batch") {
    policy.calibration = "batch";
    policy.calibrationSource = "batch";
    policy.forceBatch = settings.forceCalibration;
  } else if (calibration !== undefined) {
    const file = loadCalibration(calibration);
    policy.calibration = calibrationFor(file, calibration, job.questions, questionLabels);
    policy.calibrationSource = calibration;
    verify = (evaluator) => {
      const identity = evaluator.identity(job.model);
      if (file.identity === identity) return;
      const why = file.identity === null ? "names no model identity (its answers had no usage file beside them)" : `was fitted for ${file.identity}`;
      if (!settings.forceCalibration) {
        throw new InvocationError(
          `${calibration} ${why}, but this run's model is ${identity}; calibrate on this model's answers, or pass --force-calibration to apply it anyway`,
        );
      }
      logger.warn({ calibration, fitted_for: file.identity, model: identity }, `applying a calibration that ${why} (--force-calibration)`);
    };
  }
  const below = settings.reviewBelow ?? job.review_below;
  const auditText = settings.auditSample ?? job.audit_sample;
  const auditRate = auditText === undefined ? 0 : parseShare(auditText);
  if (auditRate === undefined) throw new InvocationError(`--audit-sample takes a share such as 1% or 0.01, not ${JSON.stringify(auditText)}`);
  const reviewFile = `${paths.sidecar}.review${extensionOf(paths.answersFormat)}`;
  // Not reviewing: an earlier run's review file beside these answers goes once they are written (an S3 one is left, and named in no summary).
  if (below === undefined && auditRate === 0 && !isS3(reviewFile)) policy.formerReview = reviewFile;
  if (below !== undefined || auditRate > 0) {
    policy.review = {
      policy: { thresholds: below === undefined ? {} : reviewThresholds(job.questions, below), auditRate, seed: settings.auditSeed },
      target: targetOf(reviewFile),
    };
    policy.reviewFile = reviewFile;
  }
  return { policy, verify };
}
