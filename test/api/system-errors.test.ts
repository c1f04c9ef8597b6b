import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { describeSystemError } from "../../src/api/system-errors.js";

const dir = mkdtempSync(join(tmpdir(), "te-syserr-"));

async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

describe("describeSystemError", () => {
  it("names the path for a directory where a file goes, and a file where a directory goes", async () => {
    expect(describeSystemError(await thrown(() => writeFile(dir, "x")))).toBe(`${dir} is a directory where a file is expected: name a file`);
    const file = join(dir, "f");
    writeFileSync(file, "");
    expect(describeSystemError(await thrown(() => readFile(join(file, "inside"))))).toMatch(
      /^a part of .*\/f\/inside is a file where a directory is expected$/,
    );
  });

  it("names the address in use", async () => {
    const a = createServer();
    await new Promise<void>((r) => a.listen(0, "127.0.0.1", r));
    const port = (a.address() as { port: number }).port;
    const b = createServer();
    const error = await new Promise<unknown>((r) => b.once("error", r).listen(port, "127.0.0.1"));
    a.close();
    expect(describeSystemError(error)).toBe(`the address 127.0.0.1:${port} is already in use: stop whatever listens there, or choose another --port`);
  });

  it("describes a wrapped cause (fetch's TypeError) and leaves other errors alone", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as { port: number }).port;
    await new Promise((r) => closed.close(r));
    const refused = await thrown(() => fetch(`http://127.0.0.1:${port}/`));
    expect(describeSystemError(refused)).toBe(`connection refused by 127.0.0.1:${port}: is the server running?`);
    expect(describeSystemError(new Error("plain"))).toBeUndefined();
    expect(describeSystemError("text")).toBeUndefined();
  });
});
