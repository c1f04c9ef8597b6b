/**
 * From outside (issue 35): a `typed-eval serve` process over real HTTP gives
 * a choice asked alone the answer it gives the same choice asked with a noul
 * and a score, and names the prompt format of its answers in a response
 * header, which typed-eval's remote evaluator records (an endpoint that names
 * none is recorded as `endpoint`).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENDPOINT_PROMPT_FORMAT, PROMPT_FORMAT_HEADER } from "../../src/api/prompt-format.js";
import type { SystemOneRequest, SystemOneResponse } from "../../src/api/schema.js";
import { PROMPT_FORMAT } from "../../src/evaluator/prompt.js";
import { RemoteEvaluator } from "../../src/evaluator/remote.js";
import { BIN } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";
import { sendJson, startUpstream } from "../support/upstream.js";

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

async function post(body: SystemOneRequest): Promise<{ response: SystemOneResponse; format: string | null }> {
  const res = await fetch(`${url}/v1/systemone`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return { response: (await res.json()) as SystemOneResponse, format: res.headers.get(PROMPT_FORMAT_HEADER) };
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
  it("answers a choice alone exactly as it answers it beside a noul and a score, and names its prompt format", async () => {
    for (const state of ["My parcel never arrived and I want my money back.", { ticket: "charged twice", tier: "gold" }]) {
      const alone = await post({ state, model: "default", questions: { topic } });
      const together = await post({ state, model: "default", questions: { refund: noul, topic, urgency: score } });
      expect(together.response.answers["topic"]).toEqual(alone.response.answers["topic"]);
      expect(alone.format).toBe(PROMPT_FORMAT);
      expect(together.format).toBe(PROMPT_FORMAT);
    }
  });

  it("is recorded by the remote evaluator as the format the server names; an endpoint that names none is 'endpoint'", async () => {
    const remote = new RemoteEvaluator({ baseUrl: url, apiKey: key, retry: { maxRetries: 0 } });
    const request: SystemOneRequest = { state: "late parcel", model: "default", questions: { topic } };
    try {
      expect((await remote.evaluate(request)).promptFormat).toBe(PROMPT_FORMAT);
    } finally {
      await remote.close();
    }
    const answer = {
      model: "other-1.0.0",
      answers: { topic: { type: "choice", choice: "billing", probabilities: { shipping: 0.2, billing: 0.5, product: 0.3 }, confidence: 0.25 } },
      usage: { input_tokens: 9, output_tokens: 1 },
    };
    for (const [header, recorded] of [
      [undefined, ENDPOINT_PROMPT_FORMAT],
      ["hosted/7", "hosted/7"],
      ["unknown", ENDPOINT_PROMPT_FORMAT],
      ["x".repeat(200), ENDPOINT_PROMPT_FORMAT],
    ] as const) {
      const other = await startUpstream((_req, res) => sendJson(res, 200, answer, header === undefined ? {} : { [PROMPT_FORMAT_HEADER]: header }));
      const client = new RemoteEvaluator({ baseUrl: other.url, retry: { maxRetries: 0 } });
      try {
        expect((await client.evaluate(request)).promptFormat).toBe(recorded);
      } finally {
        await client.close();
        await other.close();
      }
    }
  });
});
