/** The remote evaluator against a scripted upstream over real HTTP, and typed-eval fronting typed-eval. */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AuthenticationError,
  OverloadedError,
  PermissionDeniedError,
  RateLimitError,
  UnprocessableEntityError,
  UpstreamError,
  UpstreamUnavailableError,
} from "../../src/api/errors.js";
import type { SystemOneRequest, SystemOneResponse } from "../../src/api/schema.js";
import { BODY_BUDGET_BYTES, BodyBudget, RemoteEvaluator } from "../../src/evaluator/remote.js";
import { ModelRouter } from "../../src/evaluator/router.js";
import { buildServer } from "../../src/server/app.js";
import { call, KEYS, memoryLogger, testAccounts, testRouter } from "../server/helpers.js";
import { sendJson, startUpstream, type Upstream } from "../support/upstream.js";

type Step = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** An upstream that plays one scripted step per request, then answers correctly. */
let script: Step[] = [];
const seen: { headers: IncomingMessage["headers"]; body: unknown }[] = [];
let upstream: Upstream;
let base: string;

const request: SystemOneRequest = { state: "s", model: "up-model", questions: { q: { type: "noul" }, c: { type: "choice", criteria: { a: null, b: null } } } };
const valid: SystemOneResponse = {
  model: "upstream-3.1.4",
  answers: { q: { type: "noul", noul: 0.7 }, c: { type: "choice", choice: "b", probabilities: { a: 0.25, b: 0.75 }, confidence: 0.5 } },
  usage: { input_tokens: 42, output_tokens: 2 },
};

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Step =>
  (_req, res) =>
    sendJson(res, status, body, headers);
const reset: Step = (req) => req.socket.destroy();

beforeAll(async () => {
  upstream = await startUpstream((req, res, body) => {
    seen.push({ headers: req.headers, body: body ? JSON.parse(body) : undefined });
    const step = script.shift() ?? json(200, valid);
    step(req, res, body);
  });
  base = upstream.url;
});

afterAll(() => upstream?.close());

/** A remote evaluator that records its waits instead of sleeping. */
function remote(maxRetries = 2) {
  const waits: number[] = [];
  const evaluator = new RemoteEvaluator({
    baseUrl: `${base}/`,
    apiKey: "upstream-key",
    model: "their-model",
    timeoutMs: 2_000,
    retry: { maxRetries },
    random: () => 0,
    sleep: async (ms) => void waits.push(ms),
  });
  return { evaluator, waits };
}

function run(steps: Step[]) {
  script = [...steps];
  seen.length = 0;
}

describe("RemoteEvaluator", () => {
  it("posts to /v1/systemone with the key and the upstream model name, and returns a valid answer", async () => {
    run([]);
    const { evaluator } = remote();
    const { response } = await evaluator.evaluate(request);
    expect(response).toEqual(valid);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers["authorization"]).toBe("Bearer upstream-key");
    expect(seen[0]!.headers["x-service-retry-count"]).toBeUndefined();
    expect(seen[0]!.body).toMatchObject({ model: "their-model", state: "s" });
  });

  it("retries 429 after retry-after-ms, then retry-after, sending X-Service-Retry-Count", async () => {
    run([json(429, { detail: "slow" }, { "retry-after-ms": "1234" }), json(429, { detail: "slow" }, { "retry-after": "3" })]);
    const { evaluator, waits } = remote();
    await evaluator.evaluate(request);
    expect(waits).toEqual([1234, 3000]);
    expect(seen.map((s) => s.headers["x-service-retry-count"])).toEqual([undefined, "1", "2"]);
  });

  it("backs off exponentially on 429 without headers, 529, 500 and connection resets", async () => {
    run([json(429, {}), json(529, { detail: "busy" })]);
    const a = remote();
    await a.evaluator.evaluate(request);
    expect(a.waits).toEqual([500, 1000]);
    run([json(500, { detail: "boom" }), reset]);
    const b = remote();
    await b.evaluator.evaluate(request);
    expect(b.waits).toEqual([500, 1000]);
  });

  it("ignores a server delay above 60 s in favour of backoff", async () => {
    run([json(429, {}, { "retry-after-ms": "120000" })]);
    const { evaluator, waits } = remote();
    await evaluator.evaluate(request);
    expect(waits).toEqual([500]);
  });

  it("gives up after the retries with the last error, keeping its retry delay", async () => {
    run([json(429, {}, { "retry-after-ms": "10" }), json(429, {}, { "retry-after-ms": "20" }), json(429, { detail: "still" }, { "retry-after-ms": "30" })]);
    const error = await remote()
      .evaluator.evaluate(request)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    expect((error as RateLimitError).retryAfterMs).toBe(30);
    run([json(529, {}), json(529, {}), json(529, {})]);
    expect(
      await remote()
        .evaluator.evaluate(request)
        .catch((e: unknown) => e),
    ).toBeInstanceOf(OverloadedError);
    run([json(503, {}), json(503, {}), json(503, {})]);
    const server = await remote()
      .evaluator.evaluate(request)
      .catch((e: unknown) => e);
    expect(server).toBeInstanceOf(UpstreamError);
    expect((server as UpstreamError).status).toBe(503);
  });

  it("never retries 400, 401, 403, 404 or 422, and passes their details on", async () => {
    const detail = [{ loc: ["body", "questions", "q"], msg: "bad", type: "union_tag_invalid" }];
    run([json(422, { detail })]);
    const error = await remote()
      .evaluator.evaluate(request)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnprocessableEntityError);
    expect((error as UnprocessableEntityError).detail).toEqual(detail);
    expect(seen).toHaveLength(1);
    for (const status of [400, 401, 403, 404]) {
      run([json(status, { detail: `no ${status}` })]);
      const e = await remote()
        .evaluator.evaluate(request)
        .catch((x: unknown) => x);
      expect((e as { status: number }).status).toBe(status);
      expect(seen).toHaveLength(1);
    }
    run([json(401, { detail: "bad key" })]);
    expect(
      await remote()
        .evaluator.evaluate(request)
        .catch((e: unknown) => e),
    ).toBeInstanceOf(AuthenticationError);
  });

  it("an address that is not the API (404 page or stock reply, 405, 501) fails at once, no retry, in one line naming --base-url", async () => {
    const page =
      (status: number): Step =>
      (_req, res) => {
        res.writeHead(status, { "content-type": "text/html" });
        res.end(
          `<!DOCTYPE HTML>\n<html>\n<head><title>Error response</title></head>\n<body>\n<h1>Error response</h1>\n<p>Error code: ${status}</p>\n<p>Message: Unsupported method ('POST').</p>\n${"<p>more</p>\n".repeat(50)}</body>\n</html>\n`,
        );
      };
    for (const step of [
      page(404),
      page(501),
      json(405, { message: "Method Not Allowed" }),
      json(404, { detail: "Not Found" }),
      json(404, { message: "Route POST:/v1/v1/systemone not found" }),
    ]) {
      run([step]);
      const error = await remote()
        .evaluator.evaluate(request)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UpstreamUnavailableError);
      expect((error as UpstreamUnavailableError).notTheApi).toBe(true);
      const message = (error as Error).message;
      expect(message).toMatch(/not a System One API; check --base-url/);
      expect(message).not.toMatch(/\n/);
      expect(message.length).toBeLessThan(300);
      expect(seen).toHaveLength(1);
    }
    // The API's own 404 names what was not found (an unknown model): the request's failure, as before.
    run([json(404, { detail: "model their-model not found" })]);
    const own = await remote()
      .evaluator.evaluate(request)
      .catch((e: unknown) => e);
    expect((own as { status: number }).status).toBe(404);
    expect((own as UpstreamUnavailableError).notTheApi).toBeUndefined();
  });

  it("refuses answers from responses that break the contract, and retries them", async () => {
    const missing = { ...valid, answers: { q: valid.answers["q"] } };
    const wrongType = { ...valid, answers: { ...valid.answers, q: { type: "score", score: 1 } } };
    const truncated: Step = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"model": "x", "answers": {');
    };
    const outside = { ...valid, answers: { ...valid.answers, c: { type: "choice", choice: "z", probabilities: { a: 0.5, z: 0.5 }, confidence: 0 } } };
    run([json(200, missing), json(200, wrongType), truncated]);
    const error = await remote()
      .evaluator.evaluate(request)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UpstreamUnavailableError);
    expect((error as Error).message).toMatch(/invalid response/);
    run([json(200, outside)]);
    const a = remote();
    expect((await a.evaluator.evaluate(request)).response).toEqual(valid);
    expect(a.waits).toHaveLength(1);
  });

  it("an S3 store's XML 400 (it refuses a Bearer header) is not the API either, and the key it echoes is not in the message", async () => {
    const key = "te_S3echo7Kq2Lm9Pw4Zx";
    run([
      (req, res) => {
        res.writeHead(400, { "content-type": "application/xml" });
        res.end(
          `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidArgument</Code><Message>Unsupported Authorization Type</Message><ArgumentName>Authorization</ArgumentName><ArgumentValue>${req.headers.authorization}</ArgumentValue></Error>`,
        );
      },
    ]);
    const evaluator = new RemoteEvaluator({ baseUrl: base, apiKey: key, retry: { maxRetries: 2 }, sleep: async () => undefined });
    const error = await evaluator.evaluate(request).catch((e: unknown) => e);
    expect((error as UpstreamUnavailableError).notTheApi).toBe(true);
    expect((error as Error).message).toMatch(
      /answered HTTP 400 \(InvalidArgument Unsupported Authorization Type Authorization Bearer \[redacted\]\): that is not a System One API/,
    );
    expect((error as Error).message).not.toContain(key.slice(3, 11));
    expect(seen).toHaveLength(1);
  });

  it("reports an unreachable endpoint as UpstreamUnavailableError after its retries", async () => {
    const waits: number[] = [];
    const evaluator = new RemoteEvaluator({
      baseUrl: "http://127.0.0.1:9",
      retry: { maxRetries: 1 },
      random: () => 0,
      sleep: async (ms) => void waits.push(ms),
    });
    const error = await evaluator.evaluate(request).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UpstreamUnavailableError);
    expect(waits).toEqual([500]);
  });
});

describe("the first contact: GET /v1/models with the key, before a run's first request", () => {
  it("says whether the endpoint is there and takes the key, leaving anything else to the first request", async () => {
    const replies: Step[] = [];
    const gets: IncomingMessage["headers"][] = [];
    const listing = await startUpstream(
      (_req, res) => sendJson(res, 500, { detail: "no POST expected" }),
      (req, res) => {
        gets.push(req.headers);
        (replies.shift() ?? json(200, { models: [] }))(req, res, "");
      },
    );
    const key = "te_first7Contact2Key9";
    const evaluator = new RemoteEvaluator({ baseUrl: listing.url, apiKey: key });
    const contact = () => evaluator.firstContact("m").catch((e: unknown) => e);
    try {
      expect(await contact()).toBe(true);
      expect(gets[0]?.authorization).toBe(`Bearer ${key}`);
      replies.push(json(401, { detail: `invalid key ${key}` }));
      const refused = await contact();
      expect(refused).toBeInstanceOf(AuthenticationError);
      expect((refused as Error).message).toBe("invalid key [redacted]");
      replies.push(json(403, { detail: "this key is disabled" }));
      expect(await contact()).toBeInstanceOf(PermissionDeniedError);
      replies.push((_req, res) => {
        res.writeHead(400, { "content-type": "application/xml" });
        res.end("<Error><Code>InvalidArgument</Code></Error>");
      });
      expect(((await contact()) as UpstreamUnavailableError).notTheApi).toBe(true);
      // An endpoint may serve the POST only, or be slow to list: the first request decides.
      replies.push(json(404, { detail: "Not Found" }), json(500, { detail: "listing broke" }));
      expect(await contact()).toBe(true);
      expect(await contact()).toBe(true);
      expect(gets).toHaveLength(6);
    } finally {
      await evaluator.close();
      await listing.close();
    }
    const down = await new RemoteEvaluator({ baseUrl: "http://127.0.0.1:9" }).firstContact("m").catch((e: unknown) => e);
    expect((down as UpstreamUnavailableError).unreachable).toBe(true);
    expect((down as Error).message).toMatch(/^nothing answers at http:\/\/127\.0\.0\.1:9 \(connection refused by 127\.0\.0\.1:9[^)]*\): check --base-url/);
  });
});

describe("typed-eval fronting another typed-eval server", () => {
  it("answers through the remote, and passes the upstream's 4xx on faithfully", async () => {
    const { router: localRouter } = await testRouter();
    const inner = buildServer({ evaluator: localRouter, accounts: testAccounts(), logger: memoryLogger().logger });
    await inner.listen({ host: "127.0.0.1", port: 0 });
    const innerUrl = `http://127.0.0.1:${(inner.server.address() as AddressInfo).port}`;
    const front = (key: string) =>
      buildServer({
        evaluator: new ModelRouter([
          { names: ["relay"], evaluator: new RemoteEvaluator({ baseUrl: innerUrl, apiKey: key, model: "tiny", retry: { maxRetries: 0 } }) },
        ]),
        accounts: testAccounts(),
        logger: memoryLogger().logger,
      });
    const outer = front(KEYS.all);
    try {
      const body = { state: "hello", model: "relay", questions: { q: { type: "noul" } } };
      const ok = await call(outer, "inject", "POST", "/v1/systemone", { body });
      expect(ok.status).toBe(200);
      expect((ok.json as SystemOneResponse).model).toBe("tiny-1.0.0");
      // The inner server refuses a 40k-token question with its own 422: passed through as is.
      const huge = { ...body, state: "z".repeat(40_000) };
      const refused = await call(outer, "inject", "POST", "/v1/systemone", { body: huge });
      expect(refused.status).toBe(422);
      expect((refused.json as { detail: { loc: unknown[] }[] }).detail[0]!.loc).toEqual(["body", "questions", "q"]);
      // Upstream refusing this server's own key is a gateway failure (502), not the caller's 401.
      const badFront = front("te_wrong");
      const gateway = await call(badFront, "inject", "POST", "/v1/systemone", { body });
      expect(gateway.status).toBe(502);
      expect(gateway.json).toMatchObject({ type: "upstream_unavailable" });
      await badFront.close();
    } finally {
      await outer.close();
      await inner.close();
      await localRouter.close();
    }
  }, 60_000);
});

describe("response bodies in flight share one budget", () => {
  /** Streams each answer padded to `bytes` (no length declared), at the pace the client reads it. */
  async function padded(bytes: number): Promise<Upstream> {
    const chunk = Buffer.alloc(1 << 16, "x");
    return startUpstream((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(`${JSON.stringify(valid).slice(0, -1)},"pad":"`);
      let sent = 0;
      const more = () => {
        while (sent < bytes && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", more);
        }
        res.end('"}');
      };
      more();
    });
  }

  it("12 answers of 5 MB at once all pass a 16 MiB budget, holding at most the budget plus one answer", async () => {
    const up = await padded(5_000_000);
    const bodies = new BodyBudget(BODY_BUDGET_BYTES);
    try {
      const remote = new RemoteEvaluator({ baseUrl: up.url, bodies, retry: { maxRetries: 0 } });
      const answers = await Promise.all(Array.from({ length: 12 }, () => remote.evaluate(request)));
      expect(answers.every((a) => a.response.model === valid.model)).toBe(true);
      // Without the budget all 60 MB arrive at once.
      expect(bodies.peak).toBeGreaterThan(5_000_000);
      expect(bodies.peak).toBeLessThanOrEqual(BODY_BUDGET_BYTES + 5_100_000);
      expect(bodies.bytes).toBe(0);
      await remote.close();
    } finally {
      await up.close();
    }
  }, 30_000);

  it("4 answers of 40 MB at once are each refused at the 32 MiB cap, one growing at a time past the budget", async () => {
    const up = await padded(40_000_000);
    const bodies = new BodyBudget(BODY_BUDGET_BYTES);
    try {
      const remote = new RemoteEvaluator({ baseUrl: up.url, bodies, retry: { maxRetries: 0 } });
      const errors = await Promise.all(Array.from({ length: 4 }, () => remote.evaluate(request).catch((e: unknown) => e)));
      for (const e of errors) expect((e as Error).message).toMatch(/response larger than 33554432 bytes/);
      // Before: 4 x 32 MiB held at once.
      expect(bodies.peak).toBeLessThanOrEqual(BODY_BUDGET_BYTES + 32 * 1024 * 1024 + (1 << 16));
      expect(bodies.bytes).toBe(0);
      await remote.close();
    } finally {
      await up.close();
    }
  }, 60_000);
});
