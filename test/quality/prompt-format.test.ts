/**
 * `report --compare` and `assess --compare` name a prompt-format change
 * between two runs as they name a model change: at the top of the verdict,
 * in every drift cell, on the page. Older outputs, which recorded no format,
 * read as `unknown`: against a named format, the change cannot be ruled out
 * and is said so.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { measure } from "../../src/quality/measure.js";
import { qualityPage } from "../../src/quality/pages.js";
import { describeVerdict } from "../../src/quality/verdict.js";
import { runInProcess } from "../support/cli.js";
import { FIVE_QUESTIONS, IDENTITY_FILE, MODEL, writeRun } from "../support/label-sets.js";

const dir = mkdtempSync(join(tmpdir(), "te-prompt-compare-"));
const at = (name: string) => join(dir, name);

/** Sets (or, with undefined, leaves out) the prompt format in a run's usage summary. */
function recordFormat(answers: string, format: string | undefined): void {
  const path = `${answers}.usage.json`;
  const usage = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  if (format === undefined) delete usage["prompt_format"];
  else usage["prompt_format"] = format;
  writeFileSync(path, JSON.stringify(usage));
}

beforeAll(() => {
  // One night's records answered by the same model: only the recorded format differs between the runs.
  const night = { n: 400, seed: 5, questions: FIVE_QUESTIONS, model: MODEL, identity: IDENTITY_FILE };
  const tonight = writeRun(at("tonight.jsonl"), night);
  writeFileSync(at("gold.csv"), tonight.gold);
  recordFormat(at("tonight.jsonl"), "typed-eval/3");
  for (const [name, format] of [
    ["same.jsonl", "typed-eval/3"],
    ["older.jsonl", "typed-eval/2"],
    ["unrecorded.jsonl", undefined],
    ["remote.jsonl", "endpoint"],
  ] as const) {
    writeRun(at(name), night);
    recordFormat(at(name), format);
  }
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a comparison names the prompt format", () => {
  it("says nothing more when both runs read the same format; the drift cells stay ok", async () => {
    const m = await measure({ answers: at("tonight.jsonl"), compare: at("same.jsonl"), report: true });
    expect(m.verdict.model).toMatchObject({ changed: false, warn: false, prompt_format: { now: "typed-eval/3", earlier: "typed-eval/3", changed: false } });
    expect(m.verdict.model.text).not.toMatch(/prompt/);
    for (const q of m.verdict.questions) expect(q.cells.drift.mark).toBe("ok");
  });

  it("names a change of format at the top, in every drift cell (look) and on the page", async () => {
    const m = await measure({ answers: at("tonight.jsonl"), compare: at("older.jsonl"), report: true });
    expect(m.verdict.model.changed).toBe(false);
    expect(m.verdict.model.prompt_format).toEqual({ now: "typed-eval/3", earlier: "typed-eval/2", changed: true });
    expect(m.verdict.model.text).toMatch(
      /The prompt format changed: the earlier run's answers were read from prompts of format typed-eval\/2, this one's from typed-eval\/3; what moved may be the prompt, not the data\.$/,
    );
    expect(describeVerdict(m.verdict).split("\n")[1]).toBe(m.verdict.model.text);
    for (const q of m.verdict.questions) {
      expect(q.cells.drift.text).toMatch(/another prompt format$/);
      expect(q.cells.drift.mark).not.toBe("ok");
    }
    const html = qualityPage({ title: "t", verdict: m.verdict, report: m.report });
    expect(html).toContain('class="model changed"');
    expect(html).toContain("Prompt format");
  });

  it("reads an older output without the field as unknown, and says the change cannot be ruled out", async () => {
    const m = await measure({ answers: at("tonight.jsonl"), compare: at("unrecorded.jsonl"), report: true });
    expect(m.report?.compare?.prompt_format).toBe("unknown");
    expect(m.verdict.model.prompt_format.changed).toBeNull();
    expect(m.verdict.model.warn).toBe(true);
    expect(m.verdict.model.text).toMatch(
      /The prompt format may have changed: this run's is typed-eval\/3, the earlier run's was not recorded; what moved may be the prompt, not the data\.$/,
    );
    // No evidence of a change: the drift cells are marked by the data alone.
    for (const q of m.verdict.questions) expect(q.cells.drift.text).not.toMatch(/prompt/);
    // The other way round reads alike.
    const back = await measure({ answers: at("unrecorded.jsonl"), compare: at("tonight.jsonl"), report: true });
    expect(back.verdict.model.text).toMatch(/this run's was not recorded, the earlier run's is typed-eval\/3/);
    expect(back.report?.provenance?.prompt_format).toBe("unknown");
    // An endpoint that named no format against a named one: the same words.
    const remote = await measure({ answers: at("tonight.jsonl"), compare: at("remote.jsonl"), report: true });
    expect(remote.verdict.model.text).toMatch(/this run's is typed-eval\/3, the earlier run's is the endpoint's own, unnamed; what moved may be the prompt/);
  });

  it("from the commands: report --compare and assess --compare both name it", async () => {
    const report = await runInProcess(["report", at("tonight.jsonl"), "--compare", at("older.jsonl"), "-o", at("r.html")]);
    expect(report.code, report.stderr).toBe(0);
    expect(report.stdout).toMatch(/The prompt format changed: .*typed-eval\/2.*typed-eval\/3; what moved may be the prompt, not the data\./);
    const assess = await runInProcess(["assess", at("tonight.jsonl"), "--gold", at("gold.csv"), "--compare", at("older.jsonl"), "--bootstrap", "10"]);
    expect(assess.code, assess.stderr).toBe(0);
    expect(assess.stdout).toMatch(/The prompt format changed: .*what moved may be the prompt, not the data\./);
  });
});
