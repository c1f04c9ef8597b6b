/** The official JS SDK, unmodified, against our server over real HTTP. */
import { AuthenticationError, choice, noul, RateLimitError, score, TypeSafeClient, UnprocessableEntityError } from "@typesafe-ai/sdk";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responseViolations } from "../../src/api/consistency.js";
import type { SystemOneRequest, SystemOneResponse } from "../../src/api/schema.js";
import type { ModelRouter } from "../../src/evaluator/router.js";
import { buildServer } from "../../src/server/app.js";
import { KEYS, memoryLogger, testAccounts, testRouter } from "./helpers.js";

let router: ModelRouter;
let app: FastifyInstance;
let baseURL: string;
const logs = memoryLogger();

beforeAll(async () => {
  ({ router } = await testRouter());
  app = buildServer({ evaluator: router, accounts: testAccounts(), logger: logs.logger });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  if (!address || typeof address === "string") throw new Error("not listening");
  baseURL = `http://127.0.0.1:${address.port}`;
}, 60_000);

afterAll(async () => {
  await app?.close();
  await router?.close();
});

const client = (apiKey: string, maxRetries = 0) => new TypeSafeClient({ apiKey, baseURL, defaultModel: "tiny", retry: { maxRetries } });

describe("@typesafe-ai/sdk against typed-eval", () => {
  it("systemOne() with all three question types gets consistent answers and the server's request id", async () => {
    const questions = {
      refund: noul("Does the customer want a refund?", { true: "asks for money back", false: null }),
      team: choice("Which team?", { shipping: "late parcels", billing: null, product: { about: "defects" } }),
      mood: score("How upset is the customer?", ["calm", "annoyed", "furious"]),
    };
    const state = { ticket: "The kettle never came. Refund me now." };
    const { data, requestId } = await client(KEYS.all).systemOne({ state, questions }).withResponse();
    const request = { state, model: "tiny", questions } as unknown as SystemOneRequest;
    expect(responseViolations(request, data as unknown as SystemOneResponse)).toEqual([]);
    expect(data.model).toBe("tiny-1.0.0");
    expect(["shipping", "billing", "product"]).toContain(data.answers.team.choice);
    expect(data.answers.mood.score).toBeGreaterThanOrEqual(0);
    expect(requestId).toMatch(/^req_[0-9a-f]{32}$/);
    expect(logs.lines.some((l) => l["requestId"] === requestId && l["status"] === 200)).toBe(true);
  });

  it("models.list() returns the account's models", async () => {
    const models = await client(KEYS.tinyOnly).models.list();
    expect(models.map((m) => m.name)).toEqual(["tiny", "tiny-latest"]);
    expect(models[0]).toMatchObject({ description: "tiny test model", release_date: "2026-11-21" });
  });

  it("raises AuthenticationError for a bad key, with the server's request id", async () => {
    const error = await client("te_wrong")
      .models.list()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AuthenticationError);
    expect((error as AuthenticationError).status).toBe(401);
    expect((error as AuthenticationError).requestId).toMatch(/^req_/);
  });

  it("raises UnprocessableEntityError with the pydantic detail for an unknown model", async () => {
    const error = await client(KEYS.all)
      .systemOne({ state: "x", model: "nope", questions: { q: noul("Is it?") } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnprocessableEntityError);
    const body = (error as UnprocessableEntityError).body as { detail: { loc: string[] }[] };
    expect(body.detail[0]!.loc).toEqual(["body", "model"]);
  });

  it("raises RateLimitError with the server's retry delay past the account's limit", async () => {
    const slow = client(KEYS.slow);
    const statuses: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      statuses.push(
        await slow.systemOne({ state: `call ${i}`, questions: { q: noul("Ok?") } }).then(
          () => 200,
          (e: unknown) => e,
        ),
      );
    }
    expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
    expect(statuses[3]).toBeInstanceOf(RateLimitError);
    expect((statuses[3] as RateLimitError).retryAfterMs).toBeGreaterThan(15_000);
  });

  it("sends its retry count on retries, which the server accepts and logs", async () => {
    // Two retries allowed: the 429s are retried with X-TypeSafe-Retry-Count, then the error surfaces.
    const slow = new TypeSafeClient({ apiKey: KEYS.slow, baseURL, defaultModel: "tiny", retry: { maxRetries: 1, maxRetryAfterMs: 0, backoffInitialMs: 1 } });
    await slow.systemOne({ state: "again", questions: { q: noul("Ok?") } }).catch(() => undefined);
    expect(logs.lines.some((l) => l["status"] === 429 && l["retryCount"] === "1")).toBe(true);
  });
});

describe("the SDK's quickstart, unmodified, against serve --alias jev-latest=tiny", () => {
  it("succeeds with no model argument, lists the alias, and answers with the versioned id of what answered", async () => {
    const { router: aliased } = await testRouter(1);
    aliased.addAlias("jev-latest", "tiny");
    const server = buildServer({ evaluator: aliased, accounts: testAccounts(), logger: memoryLogger().logger });
    await server.listen({ host: "127.0.0.1", port: 0 });
    try {
      const address = server.server.address();
      if (!address || typeof address === "string") throw new Error("not listening");
      const quick = new TypeSafeClient({ apiKey: KEYS.all, baseURL: `http://127.0.0.1:${address.port}` });
      const data = await quick.systemOne({ state: "My parcel is late.", questions: { late: noul("Is the parcel late?") } });
      expect(data.model).toBe("tiny-1.0.0");
      expect(data.answers.late.noul).toBeGreaterThanOrEqual(0);
      expect((await quick.models.list()).map((m) => m.name)).toContain("jev-latest");
      expect(() => aliased.addAlias("x", "no-such-model")).toThrow(/no served model is named "no-such-model"/);
    } finally {
      await server.close();
      await aliased.close();
    }
  }, 60_000);
});
