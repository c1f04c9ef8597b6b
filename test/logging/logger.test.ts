import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logging/logger.js";

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

  it("respects the level", () => {
    const { lines, destination } = capture();
    const log = createLogger({ destination, level: "warn" });
    log.info("hidden");
    log.warn("shown");
    expect(lines.map((l) => l["msg"])).toEqual(["shown"]);
  });
});
