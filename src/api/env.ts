/**
 * Every environment variable typed-eval reads, in one table: what it takes,
 * its default, what it is for. They are read and checked here and nowhere
 * else; a malformed value is a one-line bad invocation (exit 2) naming the
 * variable, never a value quietly replaced by its default or a stack from
 * the library it was meant for. `docs/environment.md` is generated from the
 * table (a test holds it to the table). The variables that hold API keys are
 * named by options (`--api-key-env`, a registry entry's `api_key_env`):
 * `secret` reads those.
 */
import { InvocationError } from "./errors.js";
import { parseDuration } from "./duration.js";
import { registerSecret } from "../logging/secrets.js";

/** A setting in the environment that is not what it should be. */
export class ConfigError extends InvocationError {
  override name = "ConfigError";
}

const MALFORMED: unique symbol = Symbol("malformed");
type Parsed<T> = T | typeof MALFORMED;

interface EnvSpec<T> {
  /** What it takes, as the message and the docs say it. */
  takes: string;
  /** The value when unset (or empty). */
  fallback: T;
  /** The default as the docs show it. */
  shown: string;
  /** Who reads it, for what. */
  describe: string;
  parse(text: string): Parsed<T>;
}

function spec<T>(s: EnvSpec<T>): EnvSpec<T> {
  return s;
}

/** pino's levels; written in any case (pino reads `DEBUG` as `debug`). */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The llama.cpp backends `--gpu` takes. */
export const GPU_BACKENDS = ["auto", "cuda", "vulkan", "metal", "off"] as const;

function oneOf<const V extends string>(values: readonly V[]): (text: string) => Parsed<V> {
  return (text) => {
    const lower = text.trim().toLowerCase();
    return (values as readonly string[]).includes(lower) ? (lower as V) : MALFORMED;
  };
}

function whole(min: number, max: number): (text: string) => Parsed<number> {
  return (text) => {
    if (!/^\s*\d+\s*$/.test(text)) return MALFORMED;
    const n = Number(text);
    return n >= min && n <= max ? n : MALFORMED;
  };
}

/** An http(s) URL with a host: a value without its scheme (`localhost:9000`) is refused, not read as a path. */
function httpUrl(text: string): Parsed<string> {
  return /^https?:\/\/[^/\s]/i.test(text.trim()) ? text.trim() : MALFORMED;
}

function path(text: string): Parsed<string> {
  return text;
}

/** Seconds from `30s`, `2m`, `500ms` or a bare number of seconds. */
function seconds(text: string): Parsed<number> {
  const parsed = parseDuration(text);
  return parsed === undefined ? MALFORMED : parsed.seconds;
}

/** The table: every variable typed-eval reads, in the order the docs list them. */
export const ENV = {
  TYPED_EVAL_LOG_LEVEL: spec<LogLevel>({
    takes: `one of ${LOG_LEVELS.join(", ")} (any case)`,
    fallback: "info",
    shown: "info",
    describe: "how much every command logs (JSON lines on stderr); debug adds the stack of an error that ended a command",
    parse: oneOf(LOG_LEVELS),
  }),
  TYPED_EVAL_BASE_URL: spec<string | undefined>({
    takes: "an http:// or https:// URL",
    fallback: undefined,
    shown: "(the embedded model)",
    describe: "the remote /v1/systemone endpoint of `run`, `estimate` and `calibrate` when --base-url is not given",
    parse: httpUrl,
  }),
  TYPED_EVAL_API_KEY: spec<string | undefined>({
    takes: "the endpoint's key",
    fallback: undefined,
    shown: "(none)",
    describe:
      "the remote endpoint's key (the whitespace around it trimmed; never written anywhere: see below); --api-key-env names another variable to read it from",
    parse: path,
  }),
  TYPED_EVAL_STORAGE_RETRY: spec<number>({
    takes: "a duration such as 120s, 2m, 500ms or a bare number of seconds",
    fallback: 120,
    shown: "120s",
    describe: "how long S3 may fail before a command stops, resumable (exit 9); --storage-retry overrides it",
    parse: seconds,
  }),
  TYPED_EVAL_S3_LOCK_STALE_MS: spec<number>({
    takes: "whole milliseconds, such as 60000",
    fallback: 60_000,
    shown: "60000",
    describe: "how long an S3 journal's lock may go unrenewed before another run takes it over",
    parse: whole(1, 2 ** 31 - 1),
  }),
  TYPED_EVAL_STAGING: spec<string>({
    takes: "a folder",
    fallback: ".typed-eval/outputs",
    shown: ".typed-eval/outputs",
    describe: "where S3 outputs are assembled before their upload (and kept when it fails); a run checks it can write there before its first request",
    parse: path,
  }),
  TYPED_EVAL_MODEL_PATH: spec<string | undefined>({
    takes: "a GGUF file",
    fallback: undefined,
    shown: "(the registry's model)",
    describe: "a local model file to run instead of downloading one (--model-path)",
    parse: path,
  }),
  TYPED_EVAL_MODELS_FILE: spec<string | undefined>({
    takes: "a JSON model registry",
    fallback: undefined,
    shown: "(the bundled registry only)",
    describe: "a registry that extends the bundled one (--models-file)",
    parse: path,
  }),
  TYPED_EVAL_MODELS_DIR: spec<string | undefined>({
    takes: "a folder",
    fallback: undefined,
    shown: "$XDG_CACHE_HOME/typed-eval/models",
    describe: "where downloaded models are kept",
    parse: path,
  }),
  XDG_CACHE_HOME: spec<string | undefined>({
    takes: "a folder",
    fallback: undefined,
    shown: "~/.cache",
    describe: "the user cache folder, under which models are kept when TYPED_EVAL_MODELS_DIR is not set",
    parse: path,
  }),
  HF_ENDPOINT: spec<string>({
    takes: "an http:// or https:// URL",
    fallback: "https://huggingface.co",
    shown: "https://huggingface.co",
    describe: "where hf:// model sources are downloaded from (a mirror)",
    parse: httpUrl,
  }),
  TYPED_EVAL_GPU: spec<(typeof GPU_BACKENDS)[number]>({
    takes: `one of ${GPU_BACKENDS.join(", ")}`,
    fallback: "auto",
    shown: "auto",
    describe: "the llama.cpp backend (--gpu)",
    parse: oneOf(GPU_BACKENDS),
  }),
  TYPED_EVAL_THREADS: spec<number | undefined>({
    takes: "a whole number from 1 to 1024",
    fallback: undefined,
    shown: "(every core)",
    describe: "CPU threads of an embedded model (--threads)",
    parse: whole(1, 1024),
  }),
  TYPED_EVAL_HOST: spec<string>({
    takes: "an address of this machine",
    fallback: "127.0.0.1",
    shown: "127.0.0.1",
    describe: "the address `serve` listens on (--host)",
    parse: path,
  }),
  TYPED_EVAL_PORT: spec<number>({
    takes: "a whole number from 0 to 65535",
    fallback: 8787,
    shown: "8787",
    describe: "the port `serve` listens on (--port)",
    parse: whole(0, 65535),
  }),
  TYPED_EVAL_ACCOUNTS_FILE: spec<string>({
    takes: "a JSON accounts file",
    fallback: "accounts.json",
    shown: "accounts.json",
    describe: "the accounts and keys of `serve` and `keys` (--accounts-file)",
    parse: path,
  }),
  AWS_ENDPOINT_URL_S3: spec<string | undefined>({
    takes: "an http:// or https:// URL",
    fallback: undefined,
    shown: "(AWS S3)",
    describe: "an S3-compatible store (MinIO, Ceph, R2) for every s3:// location",
    parse: httpUrl,
  }),
  AWS_ENDPOINT_URL: spec<string | undefined>({
    takes: "an http:// or https:// URL",
    fallback: undefined,
    shown: "(AWS)",
    describe: "the same, for every AWS service, when AWS_ENDPOINT_URL_S3 is not set",
    parse: httpUrl,
  }),
  AWS_REGION: spec<string | undefined>({
    takes: "a region name",
    fallback: undefined,
    shown: "$AWS_DEFAULT_REGION, else us-east-1",
    describe: "the S3 region",
    parse: path,
  }),
  AWS_DEFAULT_REGION: spec<string>({
    takes: "a region name",
    fallback: "us-east-1",
    shown: "us-east-1",
    describe: "the S3 region when AWS_REGION is not set",
    parse: path,
  }),
} as const;

export type EnvName = keyof typeof ENV;
type ValueOf<N extends EnvName> = (typeof ENV)[N] extends EnvSpec<infer T> ? T : never;

/** The value of one variable, checked: its default when unset or empty; a `ConfigError` naming it when malformed. */
export function env<N extends EnvName>(name: N, from: NodeJS.ProcessEnv = process.env): ValueOf<N> {
  const s = ENV[name] as EnvSpec<ValueOf<N>>;
  const text = from[name];
  if (text === undefined || text.trim() === "") return s.fallback;
  const value = s.parse(text);
  if (value === MALFORMED) throw new ConfigError(malformed(name, text, s));
  return value;
}

function malformed(name: string, text: string, s: EnvSpec<unknown>): string {
  const fallback = s.fallback === undefined ? "" : `, or unset it for the default (${s.shown})`;
  return `$${name} takes ${s.takes}, not ${JSON.stringify(text)}: set it to one${fallback}`;
}

/** Whether a variable of the table is set (not empty): its value, not its default, is in force. */
export function isSet(name: EnvName, from: NodeJS.ProcessEnv = process.env): boolean {
  const text = from[name];
  return text !== undefined && text.trim() !== "";
}

/**
 * The value of a variable that holds a key (named by an option): undefined
 * when unset or empty. The whitespace around it is trimmed: a trailing CR or
 * LF is what a key file saved on Windows (or `echo`) leaves, and no header
 * value can carry it. What is left must be one bearer token, printable
 * ASCII without spaces (RFC 6750): anything else is a `ConfigError` naming
 * the variable and the character's place, never the value. The value is
 * registered with the scrubber, so no log, journal, summary or message
 * shows it, or any piece of it, whatever an endpoint echoes.
 */
export function secret(name: string, from: NodeJS.ProcessEnv = process.env): string | undefined {
  const value = from[name]?.trim();
  if (value === undefined || value === "") return undefined;
  const bad = /[^\x21-\x7e]/.exec(value);
  if (bad) {
    const what = describeCharacter(bad[0]);
    const scheme = /^bearer\s/i.test(value) ? ` (without "Bearer ": typed-eval adds it)` : "";
    throw new ConfigError(
      `$${name} holds ${what} at character ${bad.index + 1} of ${value.length}, which an API key sent as an HTTP header cannot: set it to the key alone${scheme}`,
    );
  }
  registerSecret(value);
  return value;
}

/** A character as a message names it without showing the value around it. */
function describeCharacter(c: string): string {
  const code = c.codePointAt(0) ?? 0;
  const hex = `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  const names: Record<number, string> = { 9: "a tab", 10: "a line feed", 13: "a carriage return", 32: "a space" };
  return `${names[code] ?? (code < 0x20 || code === 0x7f ? "a control character" : "a non-ASCII character")} (${hex})`;
}

/** Checks every variable of the table that is set: one `ConfigError` naming each malformed one. */
export function checkEnvironment(from: NodeJS.ProcessEnv = process.env): void {
  const problems: string[] = [];
  for (const name of Object.keys(ENV) as EnvName[]) {
    try {
      env(name, from);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(error.message);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems.join("; "));
}

/** docs/environment.md: the table as a page (a test holds the page to the table). */
export function environmentMarkdown(): string {
  const shown = (s: EnvSpec<unknown>) => (s.shown.startsWith("(") || s.shown.startsWith("$") ? s.shown : `\`${s.shown}\``);
  const rows = (Object.entries(ENV) as [string, EnvSpec<unknown>][]).map(([name, s]) => `| \`${name}\` | ${s.takes} | ${shown(s)} | ${s.describe} |`);
  return [
    "# Environment variables",
    "",
    "Every variable typed-eval reads. Each is checked when any command starts: a",
    "malformed value ends the command with one line naming the variable and what",
    "it takes, exit 2, never a value silently replaced by its default. An empty",
    "value is the same as an unset one. A flag given on the command line wins",
    "over its variable. Generated from the table in `src/api/env.ts`",
    "(`UPDATE_DOCS=1 npx vitest run test/api/env.test.ts`).",
    "",
    "| variable | takes | default | what for |",
    "|---|---|---|---|",
    ...rows,
    "",
    "The API key of a remote endpoint is read from the variable `--api-key-env`",
    "names (`TYPED_EVAL_API_KEY` unless told), and a registry entry's key from",
    "its `api_key_env`. The whitespace around a key is trimmed: a trailing CR",
    "or LF, as a key file saved on Windows or written by `echo` leaves it (`export",
    "TYPED_EVAL_API_KEY=$(cat key.txt)` keeps a CR), can never be part of a",
    "header value. What is left must be one bearer token, printable ASCII",
    "without spaces: a key holding anything else (a CR inside it, a space, as",
    "in `Bearer te_...`, a typographic quote) ends the command with exit 2",
    "before anything is sent, naming the variable and the character's place,",
    "never the value. `--no-api-key` sends no key, and reads none.",
    "",
    "Key values are never written anywhere. Every key read is registered with",
    "one scrubber (`src/logging/secrets.ts`), and every text that can carry what",
    "an endpoint said passes through it on its way out: an error body where it",
    "enters (an S3 store at a wrong `--base-url` echoes the Authorization header",
    "in its XML error), every log line (messages, errors and stacks at debug",
    "level included), the journal's failures, the errors file, the usage summary",
    "and `--summary-json` (so the copies shipped to S3 and read by reports and",
    "Airflow's XCom), and the lines on stderr. It replaces the key, any piece of",
    "it of 8 characters or more (a key cut short in a one-line message, its",
    "tail), its JSON-escaped and URL-encoded forms, a password in `--base-url`,",
    "and any `Bearer` credential, registered or not, with `[redacted]`. A key",
    "shorter than 8 characters is not scrubbed by value. A test holds it",
    "(`test/reliability/secrets.test.ts`): a canary key through a wrong URL at",
    "an S3 store, 401, 403, 4xx and 5xx bodies echoing the headers and",
    "timeouts, at trace level, then a search of every file written and every",
    "stream for it and for each 10-character piece of it.",
    "",
    "The AWS SDK reads its own credential chain (`AWS_ACCESS_KEY_ID`,",
    "`AWS_PROFILE`, ...), which typed-eval does not read or check; credentials",
    "the store rejects (an unknown access key, a secret that does not match it,",
    "an expired session token) end the command with exit 2 and one line naming",
    "the variable to fix.",
    "",
  ].join("\n");
}
