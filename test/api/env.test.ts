/**
 * Every environment variable in one table (src/api/env.ts): read nowhere
 * else, checked when any command starts, a malformed value one line naming
 * the variable (exit 2), and docs/environment.md held to the table.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { checkEnvironment, ConfigError, ENV, env, environmentMarkdown, secret } from "../../src/api/env.js";
import { scrub } from "../../src/logging/secrets.js";
import { BIN, runInProcess } from "../support/cli.js";

const ROOT = join(import.meta.dirname, "../..");
const DOC = join(ROOT, "docs/environment.md");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    return e.isDirectory() ? sources(path) : e.name.endsWith(".ts") ? [path] : [];
  });
}

describe("the environment", () => {
  it("is read in src/api/env.ts only", () => {
    const readers = sources(join(ROOT, "src"))
      .filter((file) => /process\.env\b/.test(readFileSync(file, "utf8")))
      .map((file) => relative(ROOT, file));
    expect(readers).toEqual(["src/api/env.ts"]);
  });

  it("names every TYPED_EVAL_ variable the sources mention", () => {
    const mentioned = new Set<string>();
    for (const file of sources(join(ROOT, "src"))) for (const m of readFileSync(file, "utf8").matchAll(/\bTYPED_EVAL_[A-Z_]+\b/g)) mentioned.add(m[0]);
    expect([...mentioned].filter((name) => !(name in ENV)).sort()).toEqual([]);
  });

  it("a malformed value names the variable and what it takes; unset and empty mean the default", () => {
    expect(() => env("TYPED_EVAL_S3_LOCK_STALE_MS", { TYPED_EVAL_S3_LOCK_STALE_MS: "1m" })).toThrow(
      /^\$TYPED_EVAL_S3_LOCK_STALE_MS takes whole milliseconds, such as 60000, not "1m": set it to one, or unset it for the default \(60000\)$/,
    );
    expect(env("TYPED_EVAL_S3_LOCK_STALE_MS", { TYPED_EVAL_S3_LOCK_STALE_MS: "90000" })).toBe(90_000);
    expect(env("TYPED_EVAL_S3_LOCK_STALE_MS", { TYPED_EVAL_S3_LOCK_STALE_MS: "" })).toBe(60_000);
    expect(env("TYPED_EVAL_S3_LOCK_STALE_MS", {})).toBe(60_000);
    // pino reads DEBUG as debug: accepted as what it means, in any case; a level pino has not is refused.
    expect(env("TYPED_EVAL_LOG_LEVEL", { TYPED_EVAL_LOG_LEVEL: "DEBUG" })).toBe("debug");
    expect(() => env("TYPED_EVAL_LOG_LEVEL", { TYPED_EVAL_LOG_LEVEL: "verbose" })).toThrow(ConfigError);
    expect(() => env("AWS_ENDPOINT_URL_S3", { AWS_ENDPOINT_URL_S3: "localhost:9000" })).toThrow(/AWS_ENDPOINT_URL_S3 takes an http:\/\/ or https:\/\/ URL/);
    expect(() => env("TYPED_EVAL_PORT", { TYPED_EVAL_PORT: "70000" })).toThrow(/0 to 65535/);
    expect(() => env("TYPED_EVAL_THREADS", { TYPED_EVAL_THREADS: "2.5" })).toThrow(/TYPED_EVAL_THREADS/);
    expect(() => env("TYPED_EVAL_GPU", { TYPED_EVAL_GPU: "tpu" })).toThrow(/one of auto, cuda, vulkan, metal, off/);
    // Every malformed one at once, in one line.
    expect(() => checkEnvironment({ TYPED_EVAL_PORT: "x", TYPED_EVAL_THREADS: "0" })).toThrow(/TYPED_EVAL_THREADS.*; \$TYPED_EVAL_PORT/);
    expect(() => checkEnvironment({ ...process.env, TYPED_EVAL_LOG_LEVEL: "warn" })).not.toThrow();
  });

  it("a malformed setting is exit 2 naming it for every command, before any work", async () => {
    const dir = mkdtempSync(join(tmpdir(), "te-env-"));
    const job = join(dir, "job.json");
    writeFileSync(job, JSON.stringify({ state: "text", questions: { ok: { type: "noul" } } }));
    const input = join(dir, "in.jsonl");
    writeFileSync(input, '{"text":"a"}\n');
    const cases = [
      [["run", input, "--job", job, "-o", join(dir, "out.jsonl")], "TYPED_EVAL_LOG_LEVEL", "verbose"],
      [["serve"], "TYPED_EVAL_LOG_LEVEL", "verbose"],
      [["run", input, "--job", job, "-o", join(dir, "out.jsonl")], "TYPED_EVAL_S3_LOCK_STALE_MS", "1m"],
      [["openapi"], "TYPED_EVAL_S3_LOCK_STALE_MS", "1m"],
    ] as const;
    for (const [argv, name, value] of cases) {
      {
        const r = await runInProcess([...argv], { [name]: value }, { cwd: dir });
        expect(r.code, `${argv[0]} with ${name}=${value}`).toBe(2);
        expect(r.stderr).toMatch(new RegExp(`^typed-eval: \\$${name} takes .*, not "${value}"`));
        expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      }
    }
    expect(existsSync(join(dir, "out.jsonl.journal"))).toBe(false);
  });

  it("the real process: TYPED_EVAL_LOG_LEVEL=verbose is one line and exit 2, not a logger's stack", () => {
    const r = spawnSync(process.execPath, [BIN, "run", "nothing.jsonl", "--job", "nothing.json"], {
      encoding: "utf8",
      env: { ...process.env, TYPED_EVAL_LOG_LEVEL: "verbose" },
      timeout: 30_000,
    });
    expect(r.stderr).toMatch(/^typed-eval: \$TYPED_EVAL_LOG_LEVEL takes one of fatal, error, warn, info, debug, trace, silent \(any case\), not "verbose"/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.status).toBe(2);
  });

  it("docs/environment.md is the table's page (UPDATE_DOCS=1 rewrites it)", () => {
    if (process.env["UPDATE_DOCS"] === "1") writeFileSync(DOC, environmentMarkdown());
    expect(readFileSync(DOC, "utf8"), "docs/environment.md is out of date: run UPDATE_DOCS=1 npx vitest run test/api/env.test.ts").toBe(environmentMarkdown());
  });
});

describe("a key read from the environment (secret)", () => {
  const key = "te_Env9Test4Key2Value7Xq";

  it("trims the whitespace around it (a key file saved on Windows ends in CR LF) and registers it with the scrubber", () => {
    expect(secret("K", { K: `${key}\r\n` })).toBe(key);
    expect(secret("K", { K: ` \t${key}\n` })).toBe(key);
    expect(secret("K", { K: "\r\n" })).toBeUndefined();
    expect(secret("K", {})).toBeUndefined();
    expect(scrub(`echoed: ${key.slice(0, 12)}`)).toBe("echoed: [redacted]");
  });

  it("refuses what no header can carry, naming the variable and the place, never the value", () => {
    for (const [value, what] of [
      [`${key.slice(0, 5)}\r${key.slice(5)}`, "a carriage return (U+000D) at character 6 of 25"],
      [
        `Bearer ${key}`,
        'a space (U+0020) at character 7 of 31, which an API key sent as an HTTP header cannot: set it to the key alone (without "Bearer ": typed-eval adds it)',
      ],
      [`${key}\u00e9`, "a non-ASCII character (U+00E9)"],
      [`${key}\u0000x`, "a control character (U+0000)"],
    ] as const) {
      let error: unknown;
      try {
        secret("TYPED_EVAL_API_KEY", { TYPED_EVAL_API_KEY: value });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toContain(`$TYPED_EVAL_API_KEY holds ${what}`);
      expect((error as Error).message).not.toContain(key.slice(0, 8));
    }
  });
});
