import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logging/logger.js";
import { forgetSecrets, registerSecret } from "../../src/logging/secrets.js";

function capture() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, destination };
}

describe("createLogger", () => {
  it("writes one JSON object per line with stable fields", () => {
    const { lines, destination } = capture();
    createLogger({ destination }).info({ requestId: "r1", status: 200 }, "request done");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 30, name: "typed-eval", requestId: "r1", status: 200, msg: "request done" });
    expect(typeof lines[0]!["time"]).toBe("string");
  });

  it("redacts authorization headers and API keys at any of the first three levels", () => {
    const { lines, destination } = capture();
    const secret = "te_live_0123456789abcdef";
    createLogger({ destination }).info(
      {
        authorization: `Bearer ${secret}`,
        req: { headers: { authorization: `Bearer ${secret}`, "x-api-key": secret } },
        account: { apiKey: secret, api_key: secret, name: "acme" },
      },
      "incoming",
    );
    const text = JSON.stringify(lines);
    expect(text).not.toContain(secret);
    expect(lines[0]).toMatchObject({
      authorization: "[redacted]",
      req: { headers: { authorization: "[redacted]", "x-api-key": "[redacted]" } },
      account: { apiKey: "[redacted]", api_key: "[redacted]", name: "acme" },
    });
  });

  it("scrubs a registered key from every line, whatever field carries it: the message, an error's message and stack, a nested value", () => {
    const key = "te_LoggerCanary5Qw8Zr2";
    registerSecret(key);
    try {
      const { lines, destination } = capture();
      const log = createLogger({ destination, level: "trace" });
      const error = new Error(`upstream said: Authorization ${key}`);
      log.debug({ err: error, body: { echo: [`x${key.slice(0, 12)}`] } }, `failed with ${key.slice(4)}`);
      const text = JSON.stringify(lines);
      expect(lines).toHaveLength(1);
      expect(text).not.toContain(key.slice(0, 8));
      expect(text).not.toContain(key.slice(-8));
      expect(lines[0]).toMatchObject({
        msg: "failed with [redacted]",
        body: { echo: ["x[redacted]"] },
        err: { message: "upstream said: Authorization [redacted]" },
      });
    } finally {
      forgetSecrets();
    }
  });

  it("respects the level", () => {
    const { lines, destination } = capture();
    const log = createLogger({ destination, level: "warn" });
    log.info("hidden");
    log.warn("shown");
    expect(lines.map((l) => l["msg"])).toEqual(["shown"]);
  });
});
