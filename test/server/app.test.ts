import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responseViolations } from "../../src/api/consistency.js";
import type { SystemOneRequest, SystemOneResponse, ValidationErrorItem } from "../../src/api/schema.js";
import type { LlamaEngine } from "../../src/engines/llama.js";
import type { ModelRouter } from "../../src/evaluator/router.js";
import { buildServer } from "../../src/server/app.js";
import { RateLimiter } from "../../src/server/ratelimit.js";
import { call, KEYS, memoryLogger, testAccounts, testRouter, type Transport } from "./helpers.js";

let router: ModelRouter;
let engine: LlamaEngine;
let app: FastifyInstance;
let clock = 1_000_000;
const logs = memoryLogger();

beforeAll(async () => {
  ({ router, engine } = await testRouter());
  app = buildServer({ evaluator: router, accounts: testAccounts(), logger: logs.logger, limiter: new RateLimiter(() => clock), bodyLimit: 64 * 1024 });
  await app.listen({ host: "127.0.0.1", port: 0 });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await router?.close();
});

const good: SystemOneRequest = {
  state: { ticket: "My kettle never arrived; refund me." },
  model: "tiny",
  questions: {
    refund: { type: "noul", instructions: "Refund requested?" },
    team: { type: "choice", instructions: "Team?", criteria: { shipping: null, billing: "charges" } },
    anger: { type: "score", criteria: ["calm", "angry", "furious"] },
  },
};

describe("reuse of the system text across requests", () => {
  it("answers a record with the same bits after other records, evaluating less than its input tokens", async () => {
    const first = await call(app, "http", "POST", "/v1/systemone", { body: good });
    const other: SystemOneRequest = { ...good, state: "another record entirely" };
    const before = engine.evaluatedTokens;
    const second = await call(app, "http", "POST", "/v1/systemone", { body: other });
    // Without reuse a request feeds all its input tokens and its label positions; with it, not the system text.
    expect(engine.evaluatedTokens - before).toBeLessThan((second.json as SystemOneResponse).usage.input_tokens);
    const again = await call(app, "http", "POST", "/v1/systemone", { body: good });
    expect(again.json).toEqual(first.json);
  });
});

describe.each<Transport>(["inject", "http"])("the API over %s", (transport) => {
  it("answers all three question types with a consistent 200 and request ids", async () => {
    const r = await call(app, transport, "POST", "/v1/systemone", { body: good });
    expect(r.status).toBe(200);
    const response = r.json as SystemOneResponse;
    expect(responseViolations(good, response)).toEqual([]);
    expect(response.model).toBe("tiny-1.0.0");
    expect(r.headers["x-service-request-id"]).toMatch(/^req_[0-9a-f]{32}$/);
    expect(r.headers["x-typesafe-request-id"]).toBe(r.headers["x-service-request-id"]);
  });

  it("accepts every name of a model, including its versioned id, and answers with the versioned id", async () => {
    for (const model of ["tiny", "tiny-latest", "tiny-1.0.0"]) {
      const r = await call(app, transport, "POST", "/v1/systemone", { body: { ...good, model } });
      expect(r.status).toBe(200);
      expect((r.json as SystemOneResponse).model).toBe("tiny-1.0.0");
    }
  });

  it("401 with WWW-Authenticate for a missing, malformed or unknown key, on both routes", async () => {
    for (const [url, method] of [
      ["/v1/systemone", "POST"],
      ["/v1/models", "GET"],
    ] as const) {
      for (const headers of [{}, { authorization: "Basic abc" }, { authorization: "Bearer" }, { authorization: "Bearer te_not_a_key" }]) {
        const r = await call(app, transport, method, url, { key: null, headers, body: method === "POST" ? good : undefined });
        expect(r.status).toBe(401);
        expect(r.headers["www-authenticate"]).toBe("Bearer");
        expect(r.json).toMatchObject({ type: "authentication_error" });
        expect(r.headers["x-service-request-id"]).toMatch(/^req_/);
      }
    }
  });

  it("403 when a valid key asks for a model outside its account", async () => {
    const r = await call(app, transport, "POST", "/v1/systemone", { key: KEYS.tinyOnly, body: { ...good, model: "other" } });
    expect(r.status).toBe(403);
    expect(r.json).toMatchObject({ type: "permission_denied", detail: expect.stringContaining("other") });
    expect((await call(app, transport, "POST", "/v1/systemone", { key: KEYS.tinyOnly, body: good })).status).toBe(200);
  });

  it("lists only the account's models, and every listed name is accepted by POST", async () => {
    const all = await call(app, transport, "GET", "/v1/models");
    expect((all.json as { models: { name: string }[] }).models.map((m) => m.name)).toEqual(["tiny", "tiny-latest", "other"]);
    const limited = await call(app, transport, "GET", "/v1/models", { key: KEYS.tinyOnly });
    const names = (limited.json as { models: { name: string; description: string; release_date: string }[] }).models;
    expect(names.map((m) => m.name)).toEqual(["tiny", "tiny-latest"]);
    expect(names[0]).toEqual({ name: "tiny", description: "tiny test model", release_date: "2026-11-21" });
    for (const { name } of names) {
      expect((await call(app, transport, "POST", "/v1/systemone", { key: KEYS.tinyOnly, body: { ...good, model: name } })).status).toBe(200);
    }
  });

  it("422 for an unknown model, listing the valid names", async () => {
    const r = await call(app, transport, "POST", "/v1/systemone", { body: { ...good, model: "gpt-9" } });
    expect(r.status).toBe(422);
    const detail = (r.json as { detail: ValidationErrorItem[] }).detail;
    expect(detail[0]).toMatchObject({ loc: ["body", "model"], input: "gpt-9" });
    expect(detail[0]!.msg).toContain("tiny-1.0.0");
  });

  it("422 json_invalid for a body that is not JSON, with the position", async () => {
    const r = await call(app, transport, "POST", "/v1/systemone", { raw: '{"state": "x", "model": }' });
    expect(r.status).toBe(422);
    expect((r.json as { detail: ValidationErrorItem[] }).detail[0]).toMatchObject({ type: "json_invalid", loc: ["body", 24] });
  });

  it("422 for an empty body and for nesting deeper than 64 levels", async () => {
    expect((await call(app, transport, "POST", "/v1/systemone", { raw: "" })).status).toBe(422);
    const deep = `{"state": ${"[".repeat(100)}${"]".repeat(100)}, "model": "tiny", "questions": {}}`;
    const r = await call(app, transport, "POST", "/v1/systemone", { raw: deep });
    expect(r.status).toBe(422);
    expect((r.json as { detail: ValidationErrorItem[] }).detail[0]).toMatchObject({ type: "json_too_deep", loc: ["body", 73], ctx: { max_depth: 64 } });
    expect(JSON.stringify(r.json)).toContain("JSON nested deeper than 64 levels");
  });

  it("415 for another content type, 413 for an oversized body", async () => {
    const text = await call(app, transport, "POST", "/v1/systemone", { raw: "hello", contentType: "text/plain" });
    expect(text.status).toBe(415);
    expect(text.json).toMatchObject({ type: "unsupported_media_type" });
    const big = await call(app, transport, "POST", "/v1/systemone", { body: { ...good, state: "x".repeat(70 * 1024) } });
    expect(big.status).toBe(413);
    expect(big.json).toMatchObject({ type: "payload_too_large" });
  });

  it("404 for an unknown path and 405 with Allow for a wrong method, all JSON", async () => {
    const missing = await call(app, transport, "GET", "/v2/whatever");
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ type: "not_found" });
    const wrong = await call(app, transport, "GET", "/v1/systemone");
    expect(wrong.status).toBe(405);
    expect(wrong.headers["allow"]).toBe("POST");
    const wrong2 = await call(app, transport, "DELETE", "/v1/models");
    expect(wrong2.status).toBe(405);
    expect(wrong2.headers["allow"]).toBe("GET");
  });

  it("serves /openapi.json and /healthz without a key", async () => {
    const doc = await call(app, transport, "GET", "/openapi.json", { key: null });
    expect(doc.status).toBe(200);
    expect(doc.json).toMatchObject({ openapi: "3.1.0" });
    for (const path of ["/healthz", "/health"]) {
      const health = await call(app, transport, "GET", path, { key: null });
      expect(health.status).toBe(200);
      expect(health.json).toMatchObject({ status: "ok" });
    }
  });

  it("refuses a typo inside a question with 422 extra_forbidden; a --lenient server answers it", async () => {
    const typo = { ...good, questions: { q: { type: "noul", instruction: "Is it late?" } } };
    const r = await call(app, transport, "POST", "/v1/systemone", { body: typo });
    expect(r.status).toBe(422);
    expect((r.json as { detail: ValidationErrorItem[] }).detail[0]).toMatchObject({
      type: "extra_forbidden",
      loc: ["body", "questions", "q", "noul", "instruction"],
    });
    const lenient = buildServer({ evaluator: router, accounts: testAccounts(), logger: memoryLogger().logger, lenient: true });
    try {
      expect((await call(lenient, "inject", "POST", "/v1/systemone", { body: typo })).status).toBe(200);
    } finally {
      await lenient.close();
    }
  });

  it("adds x_label_mass to each answer only when asked, equal to the evaluator's label mass", async () => {
    const plain = await call(app, transport, "POST", "/v1/systemone", { body: good });
    for (const a of Object.values((plain.json as SystemOneResponse).answers)) expect(a).not.toHaveProperty("x_label_mass");
    const { labelMass } = await router.evaluate(good as SystemOneRequest);
    for (const ask of [
      { path: "/v1/systemone?x_label_mass=true", headers: {} },
      { path: "/v1/systemone", headers: { "x-label-mass": "1" } },
    ]) {
      const r = await call(app, transport, "POST", ask.path, { body: good, headers: ask.headers });
      expect(r.status).toBe(200);
      for (const [name, a] of Object.entries((r.json as SystemOneResponse).answers))
        expect((a as unknown as { x_label_mass: number }).x_label_mass).toBe(labelMass![name]);
    }
  });

  it("accepts the optional headers of spec section 5 and logs the retry count", async () => {
    const r = await call(app, transport, "POST", "/v1/systemone", {
      body: good,
      headers: { "x-service-retry-count": "2", "x-service-sdk": "test/1", "x-service-runtime": "node", "user-agent": "t" },
    });
    expect(r.status).toBe(200);
    const line = logs.lines.find((l) => l["requestId"] === r.headers["x-service-request-id"]);
    expect(line).toMatchObject({ retryCount: "2", status: 200, account: "acme", model: "tiny", questions: 3 });
  });
});

describe("validation over HTTP", () => {
  const cases: [string, unknown, (string | number)[], string][] = [
    ["body not an object", [1, 2], ["body"], "model_attributes_type"],
    ["state missing", { model: "tiny", questions: good.questions }, ["body", "state"], "missing"],
    ["state null", { ...good, state: null }, ["body", "state"], "union_type"],
    ["document instead of state", { document: "x", model: "tiny", questions: good.questions }, ["body", "state"], "missing"],
    ["model missing", { state: "x", questions: good.questions }, ["body", "model"], "missing"],
    ["model not a string", { ...good, model: 5 }, ["body", "model"], "string_type"],
    ["questions missing", { state: "x", model: "tiny" }, ["body", "questions"], "missing"],
    ["questions not an object", { ...good, questions: [1] }, ["body", "questions"], "dict_type"],
    ["questions empty", { ...good, questions: {} }, ["body", "questions"], "too_short"],
    ["question not an object", { ...good, questions: { q: 1 } }, ["body", "questions", "q"], "model_attributes_type"],
    ["unknown type", { ...good, questions: { q: { type: "x" } } }, ["body", "questions", "q"], "union_tag_invalid"],
    ["missing type", { ...good, questions: { q: {} } }, ["body", "questions", "q"], "union_tag_not_found"],
    ["choice without criteria", { ...good, questions: { q: { type: "choice" } } }, ["body", "questions", "q", "choice", "criteria"], "missing"],
    [
      "choice criteria not an object",
      { ...good, questions: { q: { type: "choice", criteria: [] } } },
      ["body", "questions", "q", "choice", "criteria"],
      "dict_type",
    ],
    [
      "choice with 256 options",
      { ...good, questions: { q: { type: "choice", criteria: Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`o${i}`, null])) } } },
      ["body", "questions", "q", "choice", "criteria"],
      "too_long",
    ],
    ["choice with no options", { ...good, questions: { q: { type: "choice", criteria: {} } } }, ["body", "questions", "q", "choice", "criteria"], "too_short"],
    ["score without criteria", { ...good, questions: { q: { type: "score" } } }, ["body", "questions", "q", "score", "criteria"], "missing"],
    [
      "score criteria not an array",
      { ...good, questions: { q: { type: "score", criteria: {} } } },
      ["body", "questions", "q", "score", "criteria"],
      "list_type",
    ],
    [
      "score level null",
      { ...good, questions: { q: { type: "score", criteria: ["a", null] } } },
      ["body", "questions", "q", "score", "criteria", 1],
      "union_type",
    ],
    ["score with no levels", { ...good, questions: { q: { type: "score", criteria: [] } } }, ["body", "questions", "q", "score", "criteria"], "too_short"],
    [
      "score with 11 levels",
      { ...good, questions: { q: { type: "score", criteria: Array.from({ length: 11 }, (_, i) => `l${i}`) } } },
      ["body", "questions", "q", "score", "criteria"],
      "too_long",
    ],
    [
      "noul criteria not an object",
      { ...good, questions: { q: { type: "noul", criteria: "yes" } } },
      ["body", "questions", "q", "noul", "criteria"],
      "model_attributes_type",
    ],
  ];

  it.each(cases)("%s: 422 at the exact location", async (_name, body, loc, type) => {
    const r = await call(app, "http", "POST", "/v1/systemone", { body });
    expect(r.status).toBe(422);
    expect((r.json as { detail: ValidationErrorItem[] }).detail[0]).toMatchObject({ loc, type });
  });

  it("refuses a request over the token limits with 422 naming the count", async () => {
    const many = Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`q${i}`, { type: "noul" as const, instructions: "w".repeat(20_000) }]));
    const r = await call(app, "inject", "POST", "/v1/systemone", { body: { state: "s", model: "tiny", questions: many } });
    expect(r.status).toBe(422);
    expect((r.json as { detail: ValidationErrorItem[] }).detail[0]).toMatchObject({ type: "too_long", loc: ["body", "questions", "q0"] });
  });
});

describe("rate limits", () => {
  it("429 past the requests per minute, with retry-after from when capacity really frees", async () => {
    clock = 5_000_000;
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push(await call(app, "http", "POST", "/v1/systemone", { key: KEYS.slow, body: good }));
    expect(statuses.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    const limited = statuses[3]!;
    // 3 per minute refill one request every 20 s.
    expect(limited.headers["retry-after-ms"]).toBe("20000");
    expect(limited.headers["retry-after"]).toBe("20");
    expect(limited.json).toMatchObject({ type: "rate_limit_exceeded", detail: expect.stringContaining("3 requests per minute") });
    clock += 19_999;
    expect((await call(app, "inject", "POST", "/v1/systemone", { key: KEYS.slow, body: good })).headers["retry-after-ms"]).toBe("1");
    clock += 1;
    expect((await call(app, "inject", "POST", "/v1/systemone", { key: KEYS.slow, body: good })).status).toBe(200);
  });

  it("429 past the tokens per second, settled with the real usage", async () => {
    clock = 9_000_000;
    const first = await call(app, "inject", "POST", "/v1/systemone", { key: KEYS.frugal, body: good });
    expect(first.status).toBe(200);
    const used = (first.json as SystemOneResponse).usage.input_tokens;
    expect(used).toBeGreaterThan(300);
    const second = await call(app, "inject", "POST", "/v1/systemone", { key: KEYS.frugal, body: good });
    const third = await call(app, "inject", "POST", "/v1/systemone", { key: KEYS.frugal, body: good });
    const statuses = [second.status, third.status];
    expect(statuses).toContain(429);
    const limited = statuses[0] === 429 ? second : third;
    expect(limited.json).toMatchObject({ detail: expect.stringContaining("1,000 tokens per second") });
    // The bucket refills at 1,000 tokens/s: the wait is the shortfall divided by the rate.
    expect(Number(limited.headers["retry-after-ms"])).toBeGreaterThan(0);
    expect(Number(limited.headers["retry-after-ms"])).toBeLessThanOrEqual(Math.ceil(used));
    clock += Number(limited.headers["retry-after-ms"]);
    expect((await call(app, "inject", "POST", "/v1/systemone", { key: KEYS.frugal, body: good })).status).toBe(200);
  });

  it("limits one account without touching another", async () => {
    clock = 12_000_000;
    for (let i = 0; i < 3; i++) await call(app, "inject", "POST", "/v1/systemone", { key: KEYS.slow, body: good });
    expect((await call(app, "inject", "POST", "/v1/systemone", { key: KEYS.slow, body: good })).status).toBe(429);
    expect((await call(app, "inject", "POST", "/v1/systemone", { key: KEYS.all, body: good })).status).toBe(200);
  });
});

describe("logging", () => {
  it("logs one line per request with id, account, model, questions, tokens, status and time, and never a key", async () => {
    const r = await call(app, "http", "POST", "/v1/systemone", { body: good });
    const lines = logs.lines.filter((l) => l["requestId"] === r.headers["x-service-request-id"]);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ account: "acme", model: "tiny", questions: 3, status: 200, method: "POST", url: "/v1/systemone" });
    expect(lines[0]!["inputTokens"]).toBe((r.json as SystemOneResponse).usage.input_tokens);
    expect(typeof lines[0]!["ms"]).toBe("number");
    const everything = JSON.stringify(logs.lines);
    for (const key of Object.values(KEYS)) expect(everything).not.toContain(key);
  });
});

describe("answers over HTTP", () => {
  it("obey consistency rules 1-5 for a varied set of requests on the real engine", async () => {
    const states: SystemOneRequest["state"][] = ["", "plain text ✓ with unicode", { nested: { list: [1, { a: null }] } }, [1, "two", [3]], "x".repeat(3000)];
    const questionSets: SystemOneRequest["questions"][] = [
      { only: { type: "noul" } },
      { yes: { type: "noul", criteria: { true: { obj: 1 }, false: ["arr"] } }, lvl: { type: "score", criteria: ["one"] } },
      { many: { type: "choice", criteria: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`opt ${i}`, i % 2 ? null : { d: i }])) } },
      // JSON.parse, unlike an object literal, makes "__proto__" an own key: a question name like any other.
      JSON.parse(
        `{"__proto__": {"type": "score", "criteria": ${JSON.stringify(Array.from({ length: 10 }, (_, k) => ({ level: k })))}},` +
          ` "constructor": {"type": "choice", "criteria": {"1": null, "10": "ten", "b": null, "__proto__": null}}}`,
      ) as SystemOneRequest["questions"],
    ];
    let checked = 0;
    for (const state of states) {
      for (const questions of questionSets) {
        const body = { state, model: "tiny-latest", questions };
        const r = await call(app, "inject", "POST", "/v1/systemone", { raw: JSON.stringify(body) });
        expect(r.status).toBe(200);
        const parsed = JSON.parse(JSON.stringify(body)) as SystemOneRequest;
        const response = r.json as SystemOneResponse;
        expect(responseViolations(parsed, response)).toEqual([]);
        expect(Object.keys(response.answers).sort()).toEqual(Object.keys(questions).sort());
        checked++;
      }
    }
    expect(checked).toBe(20);
  }, 120_000);
});
