/**
 * From outside (issue 35): a `typed-eval serve` process over real HTTP gives
 * a choice asked alone the answer it gives the same choice asked with a noul
 * and a score.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SystemOneRequest, SystemOneResponse } from "../../src/api/schema.js";
import { BIN } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";

const dir = mkdtempSync(join(tmpdir(), "te-independence-"));
let server: ChildProcess;
let url: string;
let key: string;

beforeAll(async () => {
  const accounts = join(dir, "accounts.json");
  key = spawnSync(process.execPath, [BIN, "keys", "create", "--account", "conformance", "--accounts-file", accounts], { encoding: "utf8" }).stdout.trim();
  server = spawn(process.execPath, [BIN, "serve", "--accounts-file", accounts, "--model-path", generatedModel(TINY), "--port", "0"], {
    env: { ...process.env, TYPED_EVAL_THREADS: "1" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 60_000);
    const listen = (d: Buffer) => {
      log += d.toString();
      const match = /"url":"(http:\/\/[^"]+)"/.exec(log);
      if (match) {
        clearTimeout(timer);
        server.stderr?.off("data", listen);
        server.stderr?.resume();
        resolve(match[1] as string);
      }
    };
    server.stderr?.on("data", listen);
  });
}, 90_000);

afterAll(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server.on("exit", resolve));
    server.kill("SIGTERM");
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

async function post(body: SystemOneRequest): Promise<{ response: SystemOneResponse }> {
  const res = await fetch(`${url}/v1/systemone`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return { response: (await res.json()) as SystemOneResponse };
}

type Question = SystemOneRequest["questions"][string];
const topic: Question = {
  type: "choice",
  instructions: "Which team?",
  criteria: { shipping: "Late or lost parcels", billing: null, product: { about: "defects" } },
};
const noul: Question = { type: "noul", instructions: "Does the customer ask for a refund?", criteria: { true: "money back", false: null } };
const score: Question = { type: "score", instructions: "How urgent?", criteria: ["low", "medium", "high", "critical"] };

describe("typed-eval serve, over real HTTP", () => {
  it("answers a choice alone exactly as it answers it beside a noul and a score", async () => {
    for (const state of ["My parcel never arrived and I want my money back.", { ticket: "charged twice", tier: "gold" }]) {
      const alone = await post({ state, model: "default", questions: { topic } });
      const together = await post({ state, model: "default", questions: { refund: noul, topic, urgency: score } });
      expect(together.response.answers["topic"]).toEqual(alone.response.answers["topic"]);
    }
  });
});
