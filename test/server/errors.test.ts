/** Bodies that are not UTF-8, a failing evaluator's log lines, and HEAD on an API route. */
import { isUtf8 } from "node:buffer";
import { Writable } from "node:stream";
import fc from "fast-check";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelSet } from "../../src/evaluator/evaluator.js";
import type { ModelRouter } from "../../src/evaluator/router.js";
import { createLogger } from "../../src/logging/logger.js";
import { buildServer } from "../../src/server/app.js";
import { invalidUtf8At } from "../../src/server/body.js";
import { call, KEYS, memoryLogger, testAccounts, testRouter } from "./helpers.js";

let router: ModelRouter;
let app: FastifyInstance;
beforeAll(async () => {
  ({ router } = await testRouter(1));
  app = buildServer({ evaluator: router, accounts: testAccounts(), logger: memoryLogger().logger });
  await app.listen({ host: "127.0.0.1", port: 0 });
}, 60_000);
afterAll(async () => {
  await app?.close();
  await router?.close();
});

/** POSTs raw bytes over real HTTP. */
async function postBytes(bytes: Uint8Array): Promise<{ status: number; json: unknown }> {
  const { port } = app.server.address() as { port: number };
  const res = await fetch(`http://127.0.0.1:${port}/v1/systemone`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEYS.all}`, "content-type": "application/json" },
    body: bytes,
  });
  return { status: res.status, json: await res.json() };
}

describe("a body that is not UTF-8", () => {
  const good = (state: string) => Buffer.from(JSON.stringify({ state, model: "tiny", questions: { late: { type: "noul" } } }), "utf8");

  it("is a 400 in the error shape of the other statuses, naming the first bad byte, over real HTTP", async () => {
    const body = good("late parcel \u00e9\u00e9");
    // The two bytes of the second "é" become a lone continuation byte and a Latin-1 byte.
    const at = body.indexOf(Buffer.from("\u00e9", "utf8"), body.indexOf("\u00e9") + 2);
    body[at] = 0xe9;
    const r = await postBytes(body);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      type: "bad_request",
      detail: `Request body is not valid UTF-8: byte ${at} (0xe9) begins no well-formed UTF-8 sequence; send JSON encoded as UTF-8`,
    });
    // Overlong forms and encoded surrogates are not UTF-8 either; the same text well encoded is answered.
    for (const bad of [Buffer.from([0xc0, 0xaf]), Buffer.from([0xed, 0xa0, 0x80])]) {
      expect((await postBytes(Buffer.concat([good("x").subarray(0, 10), bad, good("x").subarray(10)]))).status).toBe(400);
    }
    expect((await postBytes(good("late parcel \u00e9\u00e9 \u{1F4E6}"))).status).toBe(200);
  });

  it("is the same 400 through inject", async () => {
    const r = await app.inject({
      method: "POST",
      url: "/v1/systemone",
      headers: { authorization: `Bearer ${KEYS.all}`, "content-type": "application/json" },
      payload: Buffer.concat([Buffer.from('{"state": "'), Buffer.from([0xff]), Buffer.from('", "model": "tiny", "questions": {}}')]),
    });
    expect(r.statusCode).toBe(400);
    expect(r.json()).toMatchObject({ type: "bad_request", detail: expect.stringMatching(/^Request body is not valid UTF-8: byte 11 \(0xff\)/) });
  });

  it("invalidUtf8At agrees with node's own check on arbitrary bytes, and the bytes before it decode", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), (bytes) => {
        const at = invalidUtf8At(bytes);
        expect(at === -1).toBe(isUtf8(bytes));
        if (at >= 0) expect(isUtf8(bytes.subarray(0, at))).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });
});

/** The router, with an evaluator that fails the way a bug would. */
function failing(inner: ModelRouter): ModelSet {
  return new Proxy(inner, {
    get(target, property) {
      if (property === "evaluate") return async () => Promise.reject(new TypeError("cannot read properties of undefined"));
      const value = Reflect.get(target, property) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

describe("a request that fails inside the server", () => {
  it("is a 500 logged in one line without a stack at error level; the stack only at debug level", async () => {
    for (const level of ["info", "debug"] as const) {
      const lines: Record<string, unknown>[] = [];
      const destination = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
          done();
        },
      });
      const broken = buildServer({ evaluator: failing(router), accounts: testAccounts(), logger: createLogger({ destination, level }) });
      const r = await call(broken, "inject", "POST", "/v1/systemone", { body: { state: "x", model: "tiny", questions: { a: { type: "noul" } } } });
      await broken.close();
      expect(r.status).toBe(500);
      expect(r.json).toEqual({ type: "internal_error", detail: "internal error; the request id identifies it in the server log" });
      const failed = lines.filter((l) => l["msg"] === "request failed");
      expect(failed[0]).toMatchObject({
        level: 50,
        status: 500,
        error: "TypeError: cannot read properties of undefined",
        requestId: r.headers["x-service-request-id"],
      });
      const withStack = lines.filter((l) => JSON.stringify(l).includes('"stack":"TypeError'));
      expect(withStack.map((l) => l["level"])).toEqual(level === "debug" ? [20] : []);
    }
  });
});

describe("HEAD on GET /v1/models", () => {
  it("is behind auth like GET: 401 without a key, 200 with one", async () => {
    expect((await call(app, "http", "HEAD", "/v1/models", { key: null })).status).toBe(401);
    expect((await call(app, "http", "HEAD", "/v1/models")).status).toBe(200);
  });
});
