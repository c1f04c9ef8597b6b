/**
 * One convention for every duration flag: a number with a unit (500ms, 30s,
 * 2m, 1h), a bare number meaning seconds; the flag that took milliseconds
 * refuses a bare number that can only be old milliseconds.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import yargs, { type Argv } from "yargs";
import { describe, expect, it } from "vitest";
import { calibrateCommand } from "../../src/cli/calibrate.js";
import { durationRule, inWords, parseDuration } from "../../src/cli/duration.js";
import { runCommand } from "../../src/cli/run.js";
import { serveCommand } from "../../src/cli/serve.js";
import { runInProcess } from "../support/cli.js";

const dir = mkdtempSync(join(tmpdir(), "te-duration-"));
const job = resolve("jobs/support-triage.json");
const missing = join(dir, "missing.jsonl");

/** The options a command's builder parses from `argv`, without running its handler. */
function parsed(command: { builder?: unknown }, argv: string[]): Record<string, unknown> {
  const builder = command.builder as (y: Argv<object>) => Argv<object>;
  return builder(yargs(argv)).parseSync() as Record<string, unknown>;
}

describe("parseDuration", () => {
  it("reads each unit into seconds, and a bare number as seconds", () => {
    expect(parseDuration("500ms")).toEqual({ seconds: 0.5, bare: false });
    expect(parseDuration("30s")).toEqual({ seconds: 30, bare: false });
    expect(parseDuration("2m")).toEqual({ seconds: 120, bare: false });
    expect(parseDuration("1h")).toEqual({ seconds: 3600, bare: false });
    expect(parseDuration("1.5m")).toEqual({ seconds: 90, bare: false });
    expect(parseDuration("30 S")).toEqual({ seconds: 30, bare: false });
    expect(parseDuration("45")).toEqual({ seconds: 45, bare: true });
    expect(parseDuration("0.25")).toEqual({ seconds: 0.25, bare: true });
    expect(parseDuration("0")).toEqual({ seconds: 0, bare: true });
  });

  it("refuses words, negative numbers, other units and compound forms", () => {
    for (const bad of ["", "soon", "-5", "-5s", "30sec", "1d", "1m30s", "s", "1e3", "30 s s", "NaN", "Infinity"]) {
      expect(parseDuration(bad), bad).toBeUndefined();
    }
  });

  it("says a duration in words for messages", () => {
    expect(inWords(30_000)).toBe("8.3 hours");
    expect(inWords(90)).toBe("1.5 minutes");
    expect(inWords(1)).toBe("1 second");
    expect(inWords(0.5)).toBe("500 milliseconds");
  });
});

describe("durationRule", () => {
  it("checks bounds and names the flag, what it takes and what was given", () => {
    const timeout = durationRule("timeout", { above: 0 });
    expect(timeout("2m")).toBe(120);
    expect(timeout(45)).toBe(45);
    expect(() => timeout("0")).toThrow('--timeout takes a duration above 0, such as 500ms, 30s, 2m or 1h (a bare number is seconds), not "0"');
    expect(() => timeout("lots")).toThrow(/not "lots"$/);
    expect(() => timeout(["1s", "2s"])).toThrow("--timeout is given 2 times; give it once");
    expect(() => timeout("1000h")).toThrow("--timeout 1000h: that is 1000 hours; the longest is 596h");
  });

  it("refuses a bare number that can only be old milliseconds, suggesting the unit", () => {
    const grace = durationRule("shutdown-grace", { min: 0, wasMilliseconds: true });
    expect(() => grace("30000")).toThrow(/^--shutdown-grace 30000: that is 8.3 hours; write 30000ms or 30s$/);
    expect(() => grace("500")).toThrow("--shutdown-grace 500: that is 8.3 minutes; write 500ms or 0.5s");
    // With a unit, any size is what it says; a bare number of seconds that is plausible passes.
    expect(grace("30000ms")).toBe(30);
    expect(grace("10m")).toBe(600);
    expect(grace("45")).toBe(45);
    expect(grace("300")).toBe(300);
    // A flag that always took seconds keeps bare numbers of any size.
    expect(durationRule("grace", { min: 0 })("30000")).toBe(30_000);
  });
});

describe("duration flags on the command line", () => {
  it("each family reads units into seconds, defaults included", () => {
    const run = parsed(runCommand, ["in.jsonl", "--job", job, "--timeout", "500ms", "--grace", "2m", "--journal-flush", "1.5s", "--storage-retry", "1h"]);
    expect([run["timeout"], run["grace"], run["journal-flush"], run["storage-retry"]]).toEqual([0.5, 120, 1.5, 3600]);
    const runDefaults = parsed(runCommand, ["in.jsonl", "--job", job]);
    expect([runDefaults["timeout"], runDefaults["grace"], runDefaults["journal-flush"], runDefaults["storage-retry"]]).toEqual([60, 30, 5, 120]);
    expect(parsed(calibrateCommand, ["a.jsonl", "-o", "c.json", "--timeout", "90"])["timeout"]).toBe(90);
    expect(parsed(serveCommand, ["--shutdown-grace", "30000ms"])["shutdown-grace"]).toBe(30);
    expect(parsed(serveCommand, [])["shutdown-grace"]).toBe(30);
  });

  it("an environment default goes through the same parser", async () => {
    const previous = process.env["TYPED_EVAL_STORAGE_RETRY"];
    process.env["TYPED_EVAL_STORAGE_RETRY"] = "2m";
    try {
      expect(parsed(runCommand, ["in.jsonl", "--job", job])["storage-retry"]).toBe(120);
      expect(parsed(runCommand, ["in.jsonl", "--job", job, "--storage-retry", "5s"])["storage-retry"]).toBe(5);
    } finally {
      if (previous === undefined) delete process.env["TYPED_EVAL_STORAGE_RETRY"];
      else process.env["TYPED_EVAL_STORAGE_RETRY"] = previous;
    }
    const bad = await runInProcess(["run", missing, "--job", job], { TYPED_EVAL_STORAGE_RETRY: "soon" }, { cwd: dir });
    expect(bad.stderr).toBe(
      'typed-eval: $TYPED_EVAL_STORAGE_RETRY takes a duration such as 120s, 2m, 500ms or a bare number of seconds, not "soon": set it to one, or unset it for the default (120s)\n',
    );
    expect(bad.code).toBe(2);
  });

  it("a bad duration is one line and exit 2 on every command that takes one", async () => {
    const cases: [string[], string][] = [
      [
        ["run", missing, "--job", job, "--grace", "a while"],
        '--grace takes a duration, such as 500ms, 30s, 2m or 1h (a bare number is seconds), not "a while"',
      ],
      [["estimate", missing, "--job", job, "--timeout", "-1s"], "--timeout takes a duration above 0"],
      [
        ["calibrate", missing, "-o", join(dir, "c.json"), "--timeout", "1d"],
        '--timeout takes a duration above 0, such as 500ms, 30s, 2m or 1h (a bare number is seconds), not "1d"',
      ],
      [["serve", "--shutdown-grace", "30000"], "--shutdown-grace 30000: that is 8.3 hours; write 30000ms or 30s"],
    ];
    for (const [argv, message] of cases) {
      // In a temporary folder: a refused run still writes its usage summary beside the default output (out/).
      const r = await runInProcess(argv, { TYPED_EVAL_BASE_URL: undefined }, { cwd: dir });
      expect(r.stderr, argv.join(" ")).toMatch(/^typed-eval: /);
      expect(r.stderr, argv.join(" ")).toContain(message);
      expect(r.stderr.trim().split("\n"), argv.join(" ")).toHaveLength(1);
      expect(r.code, argv.join(" ")).toBe(2);
    }
  });

  it("a unit is accepted where a command checks its input next (the parse let it through)", async () => {
    const r = await runInProcess(
      ["run", missing, "--job", job, "--timeout", "500ms", "--grace", "2m", "--journal-flush", "1s", "--storage-retry", "10s"],
      { TYPED_EVAL_BASE_URL: undefined },
      { cwd: dir },
    );
    expect(r.stderr).toMatch(/cannot read input .*missing\.jsonl/);
    expect(r.code).toBe(6);
  });
});
