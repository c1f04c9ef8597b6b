/** The server as operators run it: the real CLI process, keys, overload, and SIGTERM with a request in flight. */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SystemOneResponse } from "../../src/api/schema.js";
import type { ModelRouter } from "../../src/evaluator/router.js";
import { buildServer } from "../../src/server/app.js";
import { call, KEYS, memoryLogger, testAccounts, testRouter } from "./helpers.js";
import { generatedModel, TINY } from "../support/models.js";
import { BIN } from "../support/cli.js";

let router: ModelRouter;

beforeAll(async () => {
  ({ router } = await testRouter());
}, 60_000);

afterAll(async () => {
  await router?.close();
});

/** A request that keeps the tiny model busy for a while. */
const slow = (i: number) => ({ state: `${i} `.repeat(2500), model: "tiny", questions: { a: { type: "noul" }, b: { type: "score", criteria: ["x", "y"] } } });

describe("overload", () => {
  it("529 with retry-after once more requests are in progress than the bound", async () => {
    const app = buildServer({ evaluator: router, accounts: testAccounts(), logger: memoryLogger().logger, maxQueue: 1 });
    try {
      const replies = await Promise.all([0, 1, 2, 3].map((i) => call(app, "inject", "POST", "/v1/systemone", { body: slow(i) })));
      const statuses = replies.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 529, 529, 529]);
      const overloaded = replies.find((r) => r.status === 529)!;
      expect(overloaded.json).toMatchObject({ type: "overloaded" });
      expect(Number(overloaded.headers["retry-after"])).toBeGreaterThanOrEqual(1);
      expect(Number(overloaded.headers["retry-after-ms"])).toBeGreaterThan(0);
      // Once the queue drains, requests are served again.
      expect((await call(app, "inject", "POST", "/v1/systemone", { body: slow(9) })).status).toBe(200);
    } finally {
      await app.close();
    }
  }, 60_000);
});

function cli(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", timeout: 30_000, env: { ...process.env, ...env } });
}

describe("typed-eval keys and serve", () => {
  it("keys create prints a key once and stores only its hash", () => {
    const file = join(mkdtempSync(join(tmpdir(), "te-keys-")), "accounts.json");
    const made = cli(["keys", "create", "--account", "acme", "--models", "default", "qwen2.5-0.5b-instruct-1.0.0", "--accounts-file", file]);
    expect(made.status).toBe(0);
    const key = made.stdout.trim();
    expect(key).toMatch(/^te_[A-Za-z0-9_-]{32}$/);
    const stored = readFileSync(file, "utf8");
    expect(stored).not.toContain(key);
    expect(JSON.parse(stored)).toMatchObject({
      accounts: [{ name: "acme", models: ["default", "qwen2.5-0.5b-instruct-1.0.0"], keys: [{ sha256: expect.stringMatching(/^[0-9a-f]{64}$/) }] }],
    });
    const second = cli(["keys", "create", "--account", "acme", "--accounts-file", file]);
    expect(second.stdout.trim()).not.toBe(key);
    expect((JSON.parse(readFileSync(file, "utf8")) as { accounts: { keys: unknown[] }[] }).accounts[0]!.keys).toHaveLength(2);
  });

  it("serve refuses to start without accounts and says how to create one", () => {
    const file = join(mkdtempSync(join(tmpdir(), "te-keys-")), "none.json");
    const r = cli(["serve", "--accounts-file", file, "--model-path", generatedModel(TINY)]);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("typed-eval keys create --account NAME");
  });

  it("on SIGTERM stops accepting, finishes the request in flight, and exits 0", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "te-keys-")), "accounts.json");
    const key = cli(["keys", "create", "--account", "ops", "--accounts-file", file]).stdout.trim();
    const server = spawn(process.execPath, [BIN, "serve", "--accounts-file", file, "--model-path", generatedModel(TINY), "--port", "0"], {
      env: { ...process.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let log = "";
    server.stderr.on("data", (d: Buffer) => (log += d.toString()));
    const exited = new Promise<number | null>((resolve) => server.on("exit", (code) => resolve(code)));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 30_000);
      server.stderr.on("data", () => {
        const match = /"url":"(http:\/\/[^"]+)"/.exec(log);
        if (match) {
          clearTimeout(timer);
          resolve(match[1] as string);
        }
      });
    });
    const body = {
      state: "y ".repeat(3000),
      model: "default",
      questions: Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`q${i}`, { type: "noul" }])),
    };
    const inFlight = fetch(`${url}/v1/systemone`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    // Wait until the server holds the request (its in-progress gauge), then ask it to stop.
    for (;;) {
      const metrics = await (await fetch(`${url}/metrics`)).text();
      if (/^typed_eval_requests_in_progress 1$/m.test(metrics)) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    server.kill("SIGTERM");
    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(Object.keys(((await res.json()) as SystemOneResponse).answers)).toHaveLength(6);
    expect(await exited).toBe(0);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    expect(log).toContain("shutting down");
    expect(log).toContain('"outcome":"drained"');
    expect(log).not.toContain(key);
  }, 60_000);
});

describe("account isolation", () => {
  it("a key of one account cannot use another account's models, and its 403 names only its own account", async () => {
    const app = buildServer({ evaluator: router, accounts: testAccounts(), logger: memoryLogger().logger });
    const r = await call(app, "inject", "POST", "/v1/systemone", { key: KEYS.tinyOnly, body: { ...slow(1), model: "other-2.0.0" } });
    expect(r.status).toBe(403);
    expect(r.text).not.toContain("acme");
    await app.close();
  });
});
