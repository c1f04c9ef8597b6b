/**
 * The world the scheduler examples run in, for their tests: a real
 * S3-compatible server (s3rver) whose bucket acme-support holds tonight's
 * tickets, a real endpoint (in this process) serving a generated model behind
 * an API key, and `typed-eval` and `node` in a folder to mount at
 * /usr/local/bin, where `npm install -g` with Node's official build puts them.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GetObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3";
import { startS3Store } from "./s3-proxy.js";
import { openModels } from "../../src/evaluator/factory.js";
import type { ModelRouter } from "../../src/evaluator/router.js";
import { createLogger } from "../../src/logging/logger.js";
import { ModelRegistry } from "../../src/models/registry.js";
import { AccountStore, createKey } from "../../src/server/accounts.js";
import { type RunningServer, startServer } from "../../src/server/serve.js";
import { BIN } from "./cli.js";
import { generatedModel, TINY } from "./models.js";

export const ROOT = join(import.meta.dirname, "../..");
export const EXAMPLES = join(ROOT, "examples/schedulers");
export const BUCKET = "acme-support";
const TICKETS = join(ROOT, "examples/data/tickets.jsonl");
export const ticketCount = readFileSync(TICKETS, "utf8")
  .split("\n")
  .filter((l) => l.trim() !== "").length;

export interface Row {
  id: string;
  answers: Record<string, unknown>;
}

export interface Night {
  dir: string;
  /** Tonight and last night, as `date +%F` says here (local time) and `date -u +%F` (UTC). */
  day: { local: string; utc: string };
  yesterday: { local: string; utc: string };
  /** The endpoint's URL and a key it accepts. */
  api: RunningServer;
  key: string;
  /** The AWS SDK's settings for the S3 server, as a machine's ~/.aws or a pod's identity would give them. */
  s3Env: Record<string, string>;
  /** A folder holding `typed-eval` (this checkout's) and `node` (this Node), to mount at /usr/local/bin. */
  binDir: string;
  rows(key: string): Promise<Row[]>;
  /** Puts last night's answers of a shard: tonight's as they are, or (drifted) with every ticket sent to team "other". */
  putLastNight(tonight: string, lastNight: string, drifted: boolean): Promise<void>;
  close(): Promise<void>;
}

const date = (args: string[]) => execFileSync("date", args, { encoding: "utf8" }).trim();

/** Starts the S3 server (tonight's tickets under tickets/<day>/ for both clocks) and the endpoint. */
export async function startNight(prefix: string): Promise<Night> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const day = { local: date(["+%F"]), utc: date(["-u", "+%F"]) };
  const yesterday = { local: date(["-d", "yesterday", "+%F"]), utc: date(["-u", "-d", "yesterday", "+%F"]) };
  // Through the proxy that gives s3rver the conditional writes an S3 journal's lock needs, as S3 has.
  const s3 = await startS3Store(join(dir, "s3"), [BUCKET]);
  const s3Env = s3.env;
  const client = s3.client;
  for (const d of new Set([day.local, day.utc])) {
    await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `tickets/${d}/tickets.jsonl`, Body: readFileSync(TICKETS) }));
  }
  const accounts = join(dir, "accounts.json");
  const key = createKey(accounts, "nightly", undefined);
  const router: ModelRouter = await openModels(["default"], { registry: ModelRegistry.load(), modelPath: generatedModel(TINY), threads: 1 });
  const api = await startServer({
    host: "127.0.0.1",
    port: 0,
    evaluator: router,
    accounts: AccountStore.load(accounts),
    logger: createLogger({ level: "silent" }),
  });
  const binDir = join(dir, "usr-local-bin");
  mkdirSync(binDir);
  symlinkSync(BIN, join(binDir, "typed-eval"));
  symlinkSync(process.execPath, join(binDir, "node"));

  const rows = async (objectKey: string): Promise<Row[]> => {
    const object = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: objectKey }));
    const text = (await object.Body?.transformToString()) ?? "";
    return text
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l) as Row);
  };
  const putLastNight = async (tonight: string, lastNight: string, drifted: boolean) => {
    const tonightRows = await rows(tonight);
    const first = tonightRows[0];
    if (first === undefined) throw new Error(`${tonight} holds no answers to copy as last night's`);
    const teams = Object.keys((first.answers["team"] as { probabilities: Record<string, number> }).probabilities);
    const last = tonightRows.map((row) => {
      if (!drifted) return row;
      const probabilities = Object.fromEntries(teams.map((t) => [t, t === "other" ? 1 : 0]));
      return { ...row, answers: { ...row.answers, team: { type: "choice", choice: "other", probabilities, confidence: 1 } } };
    });
    await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: lastNight, Body: `${last.map((r) => JSON.stringify(r)).join("\n")}\n` }));
  };
  return {
    dir,
    day,
    yesterday,
    api,
    key,
    s3Env,
    binDir,
    rows,
    putLastNight,
    close: async () => {
      await api.shutdown("test over");
      await s3.close();
    },
  };
}
