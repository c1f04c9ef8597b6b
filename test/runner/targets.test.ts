/**
 * Every write checked, on real files, devices and pipes: a file is renamed
 * into place only complete and on disk; a full disk (a 64 KiB tmpfs when this
 * process may mount one, /dev/full) and a refused write reach the caller from
 * the write, the flush or the commit, leaving nothing in place; a pipe whose
 * reader went away is the reader closing the output (EPIPE).
 */
import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { classify, OutputClosedError } from "../../src/api/verdict.js";
import { partialFile, stdoutSink } from "../../src/runner/output/targets.js";
import { canMountTmpfs } from "../support/lifecycle.js";

const dir = mkdtempSync(join(tmpdir(), "te-targets-"));

const MOUNT = canMountTmpfs();
if (!MOUNT) console.warn("targets.test: cannot mount a tmpfs here (not root on Linux): the real full-disk case is skipped");

describe("a file output", () => {
  it("appears only complete: nothing at the path before the commit, the whole file after it, no .partial left", async () => {
    const path = join(dir, "a.jsonl");
    const sink = partialFile(path);
    for (let i = 0; i < 5000; i++) await sink.write(`${JSON.stringify({ i, pad: "x".repeat(40) })}\n`);
    expect(existsSync(path)).toBe(false);
    await sink.commit();
    expect(readFileSync(path, "utf8").split("\n").filter(Boolean)).toHaveLength(5000);
    expect(existsSync(`${path}.partial`)).toBe(false);
  });

  it.runIf(MOUNT)("on a full disk (a 64 KiB tmpfs) fails with ENOSPC from the write or the commit, leaves nothing in place, and aborts clean", async () => {
    const disk = mkdtempSync(join(tmpdir(), "te-full-"));
    expect(spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", disk]).status).toBe(0);
    try {
      const path = join(disk, "out.jsonl");
      const sink = partialFile(path);
      const failure = await (async () => {
        for (let i = 0; i < 2000; i++) await sink.write(`${"y".repeat(99)}\n`);
        await sink.commit();
      })().catch((error: unknown) => error);
      expect((failure as NodeJS.ErrnoException).code).toBe("ENOSPC");
      // After anything was paid, a full disk is the store's failure (9); before, the place named (2).
      expect(classify(failure, "write", { paid: true }).verdict).toBe("storage-unavailable");
      expect(classify(failure, "write", { paid: false }).verdict).toBe("bad-input");
      expect(existsSync(path)).toBe(false);
      await sink.abort();
      expect(readdirSync(disk)).toEqual([]);
    } finally {
      spawnSync("umount", [disk]);
    }
  });
});

describe("stdout as an output", () => {
  it("on /dev/full: ENOSPC reaches the caller, never a silent success", async () => {
    const sink = stdoutSink(createWriteStream("/dev/full") as unknown as NodeJS.WriteStream);
    const failure = await (async () => {
      await sink.write("a row\n");
      await sink.commit();
    })().catch((error: unknown) => error);
    expect((failure as NodeJS.ErrnoException).code).toBe("ENOSPC");
    expect(classify(failure, "write", { paid: true }).reason).toMatch(/no space left on the device holding stdout/);
  });

  it("into a pipe whose reader is gone (head -c 1): OutputClosedError, a stop with SIGPIPE's exit code", async () => {
    const head = spawn("head", ["-c", "1"], { stdio: ["pipe", "ignore", "ignore"] });
    await new Promise((resolve) => head.on("spawn", resolve));
    const sink = stdoutSink(head.stdin as unknown as NodeJS.WriteStream);
    const failure = await (async () => {
      for (let i = 0; i < 10_000; i++) await sink.write(`${"z".repeat(199)}\n`);
      await sink.commit();
    })().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OutputClosedError);
    expect(classify(failure, "write", { paid: true })).toMatchObject({ verdict: "stopped", signal: "SIGPIPE" });
  });
});
