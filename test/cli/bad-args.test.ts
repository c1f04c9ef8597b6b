/**
 * Every command with each kind of bad argument: exit 2, one line naming what
 * is wrong, never a stack trace, and nothing loaded or written first. In this
 * process, through the same parser and boundary as the CLI (test/cli/boundary
 * spawns the real process for the cases where the process is the point).
 */
import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";

const dir = mkdtempSync(join(tmpdir(), "te-badargs-"));
const job = resolve("jobs/support-triage.json");
const data = resolve("examples/data/tickets.jsonl");
const aFile = join(dir, "a-file");
writeFileSync(aFile, "not a folder");
// A copy of the input for the case whose refusal still writes its usage summary beside the output (here: the input).
const dataCopy = join(dir, "tickets.jsonl");
copyFileSync(data, dataCopy);
// Gold exported without its id column: one line naming the columns it has (it said "no id" once per row, 20 times).
writeFileSync(join(dir, "gold-no-id.csv"), "wants_refund,note\nyes,a\nno,b\nno,c\n");
writeFileSync(join(dir, "answers.jsonl"), `${JSON.stringify({ id: "T-1000", answers: { wants_refund: { type: "noul", noul: 0.2 } } })}\n`);
// No model file anywhere: a command that got past its checks would try to download and fail differently.
const env = {
  TYPED_EVAL_MODEL_PATH: undefined,
  TYPED_EVAL_MODELS_DIR: join(dir, "models"),
  HF_ENDPOINT: "http://127.0.0.1:9",
  TYPED_EVAL_BASE_URL: undefined,
};

const cases: [string[], RegExp][] = [
  [["run", data, "--job", job, "--rpm", "abc"], /--rpm takes a number above 0/],
  [["run", data, "--job", job, "--tps", "-5"], /--tps takes a number above 0, not -5/],
  [["run", data, "--job", job, "--concurrency", "0"], /--concurrency takes a whole number from 1 to 10000, not 0/],
  [["run", data, "--job", job, "--concurrency", "2.5"], /--concurrency takes a whole number/],
  [["run", data, "--job", job, "--timeout", "0"], /--timeout takes a duration above 0/],
  [["run", data, "--job", job, "--max-retries", "-1"], /--max-retries takes a whole number from 0 to 100/],
  [["run", data, "--job", job, "--max-failures-in-a-row", "0"], /--max-failures-in-a-row/],
  [["run", data, "--job", job, "--price", "-1"], /--price takes a number of at least 0/],
  [["run", data, "--job", job, "--shard", "1of3"], /--shard takes i\/n .*not "1of3"/],
  [["run", data, "--job", job, "--shard", "0/3"], /--shard takes i\/n/],
  [["run", data, "--job", job, "--shard", "4/3"], /--shard takes i\/n/],
  [["run", data, "--job", job, "-o", join(aFile, "out.csv")], /cannot write --output .*a-file is a file, not a folder/],
  [["run", data, "--job", job, "--journal", join(aFile, "j")], /cannot write --journal/],
  [["run", data, "--job", job, "--base-url", ""], /--base-url is empty/],
  [["run", data, "--job", job, "--base-url", "ftp://host"], /--base-url takes an http/],
  [["run", data, "--job", job, "--review-below", "2"], /--review-below takes a number from 0 to 1/],
  [["run", data, "--job", job, "--audit-sample", "lots"], /--audit-sample takes a share/],
  [["run", data, "--job", job, "--calibration", join(dir, "none.json")], /cannot read calibration/],
  [["run", data, "--job", job, "--output-format", "xml"], /Invalid values:[\s\S]*output-format/],
  [["run", data, "--job", job, "-o", "a.jsonl", "-o", "b.jsonl"], /--output is given 2 times/],
  [["run", data, "--job", job, "--threads", "0"], /--threads takes a whole number from 1/],
  [["run", data, "--job", job, "--context-size", "ten"], /--context-size takes a whole number/],
  [["run", data], /Missing required argument: job/],
  [["run", dataCopy, "--job", job, "-o", dataCopy], /is the input itself/],
  [["estimate", data, "--job", job, "--rpm", "0"], /--rpm takes a number above 0/],
  [["usage", job], /is not a typed-eval usage summary/],
  [["usage", job, "--project", "-3"], /--project takes a number of at least 0/],
  [["ask", "-q", job, "--threads", "-2"], /--threads/],
  [["ask", "-q", job, "--gpu", "tpu"], /Invalid values:[\s\S]*gpu/],
  [["ask", "-q", job, "--gpu", "cuda", "--model-path", generatedModel(TINY), "--state", job], /--gpu cuda: no CUDA build of llama\.cpp can be loaded here/],
  [["serve", "--port", "99999"], /--port takes a whole number from 0 to 65535/],
  [["serve", "--max-queue", "0"], /--max-queue/],
  [["serve", "--alias", "jev-latest"], /--alias takes NAME=MODEL, such as jev-latest=default/],
  [["keys", "create", "--account", ""], /--account takes a name/],
  // A file a flag names (--gold, --compare, --job) is a mistake in the invocation when missing: 2, never 6.
  [["assess", join(dir, "answers.jsonl"), "--gold", join(dir, "missing.csv")], /cannot read gold/],
  [
    ["assess", join(dir, "answers.jsonl"), "--gold", join(dir, "gold-no-id.csv")],
    /gold-no-id\.csv: it has no column id; its columns are wants_refund, note: name its id column with --id-field/,
  ],
  [["thresholds", join(dir, "answers.jsonl"), "--gold", join(dir, "missing.csv"), "--target-accuracy", "0.9"], /cannot read gold/],
  [["calibrate", join(dir, "answers.jsonl"), "--gold", join(dir, "missing.csv"), "-o", join(dir, "c.json")], /cannot read gold/],
  [
    ["report", join(dir, "answers.jsonl"), "--compare", join(dir, "missing.jsonl"), "-o", join(dir, "r.html")],
    /cannot read --compare .*missing\.jsonl: ENOENT/,
  ],
  [["run", data, "--job", join(dir, "missing.json")], /cannot read job file/],
  [["ask", "-q", join(dir, "missing.json"), "--state", job], /no such file/],
  [["assess", join(dir, "answers.jsonl"), "--gold", data, "--bootstrap", "-1"], /--bootstrap takes a whole number from 0/],
  [["assess", join(dir, "answers.jsonl"), "--gold", data, "--fail-if", "nonsense"], /--fail-if: cannot read "nonsense"/],
  [["calibrate", join(dir, "answers.jsonl"), "-o", join(dir, "c.json")], /fits on gold labels: pass --gold/],
  [["calibrate", join(dir, "answers.jsonl"), "--gold", data, "-o", join(dir, "c.json"), "--folds", "1"], /--folds takes a whole number from 2 to 100/],
  [["thresholds", join(dir, "answers.jsonl"), "--gold", data, "--target-accuracy", "0"], /--target-accuracy takes a number above 0/],
  [["models", "pull", "no-such-model"], /unknown model "no-such-model"/],
];

describe("bad arguments", () => {
  it("an absent primary input exits 6 for every command (a scheduler maps it to skipped), in one line", async () => {
    const missing = join(dir, "missing.jsonl");
    const absent: [string[], RegExp][] = [
      [["estimate", missing, "--job", job], /cannot read input .*missing\.jsonl: ENOENT/],
      [["run", missing, "--job", job], /cannot read input .*missing\.jsonl: ENOENT/],
      [["assess", missing, "--gold", data], /cannot read answers .*missing\.jsonl/],
      [["thresholds", missing, "--gold", data, "--target-accuracy", "0.9"], /cannot read answers .*missing\.jsonl/],
      [["calibrate", missing, "--gold", data, "-o", join(dir, "c.json")], /cannot read answers .*missing\.jsonl/],
      [["report", missing, "-o", join(dir, "r.html")], /cannot read answers .*missing\.jsonl/],
      [["labelstudio", "export", missing, "--job", job, "-o", join(dir, "t.json")], /cannot read answers .*missing\.jsonl/],
      [["labelstudio", "import", missing, "--job", job, "-o", join(dir, "g.csv")], /no such Label Studio export/],
      [["usage", missing], /no such usage summary/],
      [["validate", missing], /no such request file/],
      [["ask", "-q", job, "--state", missing], /no such state file/],
    ];
    for (const [args, message] of absent) {
      const r = await runInProcess(args, env, { cwd: dir });
      expect(r.stderr, args.join(" ")).toMatch(message);
      expect(r.code, `${args.join(" ")}\n${r.stderr}`).toBe(6);
      // One line; `run`'s verdict adds its second (what is kept, what to do next).
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(args[0] === "run" ? 2 : 1);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      // The file named once ("cannot read answers x: cannot read input x: ENOENT" said it twice).
      expect(r.stderr, args.join(" ")).not.toMatch(/cannot read .*cannot read/);
    }
  }, 60_000);

  it(`each of ${cases.length} mistakes exits 2 with one clear line and no stack trace`, async () => {
    const results = [];
    // In a temporary folder: a refusal still writes its usage summary beside the default output (out/<job>-<input>.jsonl).
    for (const [args] of cases) results.push(await runInProcess(args, env, { cwd: dir }));
    results.forEach((r, i) => {
      const [args, message] = cases[i]!;
      const label = args.join(" ");
      expect(r.stderr, label).toMatch(message);
      expect(r.code, `${label}\n${r.stderr}`).toBe(2);
      expect(r.stderr, label).not.toMatch(/\n\s+at /);
      expect(r.stderr, label).not.toMatch(/downloading|cannot reach/);
      expect(r.stderr, label).not.toMatch(/cannot read .*cannot read/);
    });
  }, 120_000);
});
