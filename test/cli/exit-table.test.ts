/**
 * One table of exit codes for every command that reads a file and writes
 * one: `report`, `assess`, `calibrate`, `thresholds`, `labelstudio export`
 * and `import`, `estimate` and `run` each meet the same situations and end
 * with the same code (docs/scheduling.md's table): a missing or empty
 * primary input 6; a missing --gold, --compare or --job 2; a file of
 * another kind 2, naming its kind; an output that cannot be written 2,
 * found before any work, with nothing left behind. Each command also runs
 * once on good files, so a refusal here is the situation's, not a broken
 * command line's. In this process, with the working directory in a
 * temporary folder.
 */
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { LabelStudioTask } from "../../src/quality/labelstudio.js";
import { runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";
import { unprivileged } from "../support/unprivileged.js";
import { jsonExport } from "../quality/fixtures/labelstudio-exports.js";

const dir = mkdtempSync(join(tmpdir(), "te-exit-table-"));
// Readable by the unprivileged user the read-only cases run as.
chmodSync(dir, 0o755);
const env = { TYPED_EVAL_MODEL_PATH: generatedModel(TINY), TYPED_EVAL_BASE_URL: undefined };
const job = join(dir, "job.json");
copyFileSync(resolve("jobs/support-triage.json"), job);
const gold = resolve("examples/data/tickets.gold.csv");
const lines = readFileSync(resolve("examples/data/tickets.jsonl"), "utf8").trim().split("\n");
const records = join(dir, "records.jsonl");
// Six tickets and one without its state: the run writes answers, an errors file and a usage summary.
writeFileSync(records, `${[...lines.slice(0, 6), JSON.stringify({ ticket_id: "T-bad" })].join("\n")}\n`);
const answers = join(dir, "run", "answers.jsonl");
const errorsFile = `${answers}.errors.jsonl`;
const usageFile = `${answers}.usage.json`;
const labelled = join(dir, "labelled.json");
const missing = join(dir, "missing.jsonl");
const empty = join(dir, "empty.jsonl");
writeFileSync(empty, "");
const aFile = join(dir, "a-file");
writeFileSync(aFile, "not a folder\n");
const readOnly = join(dir, "read-only");
mkdirSync(readOnly, { mode: 0o555 });
chmodSync(readOnly, 0o555);

/** A command: its line with `input` as its primary input, the flag naming a file it needs, and its output flags. */
interface Command {
  name: string;
  /** The primary input it works on when all is well. */
  good: () => string;
  /** Its line without its outputs; `flagFile` replaces the file its `needs` flag names. */
  argv: (input: string, flagFile?: string) => string[];
  /** The flag whose file, when missing, is a mistake in the invocation. */
  needs: "--gold" | "--compare" | "--job";
  /** Its output flags, each with the file name it writes in the case's folder. */
  outputs: [flag: string, file: string][];
}

const goldFlags = (g: string) => ["--gold", g, "--id-field", "ticket_id", "--allow-unmatched"];

const COMMANDS: Command[] = [
  {
    name: "report",
    good: () => answers,
    argv: (input, compare = answers) => ["report", input, "--compare", compare],
    needs: "--compare",
    outputs: [["-o", "r.html"]],
  },
  {
    name: "assess",
    good: () => answers,
    argv: (input, g = gold) => ["assess", input, ...goldFlags(g), "--bootstrap", "0"],
    needs: "--gold",
    outputs: [
      ["--html", "a.html"],
      ["--suspects", "s.csv"],
    ],
  },
  {
    name: "calibrate",
    good: () => answers,
    argv: (input, g = gold) => ["calibrate", input, ...goldFlags(g), "--method", "batch", "--force"],
    needs: "--gold",
    outputs: [["-o", "c.json"]],
  },
  {
    name: "thresholds",
    good: () => answers,
    argv: (input, g = gold) => ["thresholds", input, ...goldFlags(g), "--target-accuracy", "0.5"],
    needs: "--gold",
    outputs: [],
  },
  {
    name: "labelstudio export",
    good: () => answers,
    argv: (input, j = job) => ["labelstudio", "export", input, "--job", j],
    needs: "--job",
    outputs: [
      ["-o", "t.json"],
      ["--config", "c.xml"],
    ],
  },
  {
    name: "labelstudio import",
    good: () => labelled,
    argv: (input, j = job) => ["labelstudio", "import", input, "--job", j],
    needs: "--job",
    outputs: [["-o", "g.csv"]],
  },
  { name: "estimate", good: () => records, argv: (input, j = job) => ["estimate", input, "--job", j], needs: "--job", outputs: [] },
  {
    name: "run",
    good: () => records,
    argv: (input, j = job) => ["run", input, "--job", j, "--max-error-rate", "0.5"],
    needs: "--job",
    outputs: [
      ["-o", "o.jsonl"],
      ["--errors", "o.errors.jsonl"],
      ["--summary-json", "sj.json"],
    ],
  },
];

/** A command's whole line: its primary input, its outputs in `out`, and the file its `needs` flag names. */
function line(c: Command, input: string, out: string, flagFile?: string): string[] {
  return [...c.argv(input, flagFile), ...c.outputs.flatMap(([flag, file]) => [flag, join(out, file)])];
}

let folders = 0;
/** A fresh folder for one case's outputs, writable by the unprivileged user too (only the read-only folder is refused). */
function folder(): string {
  const out = join(dir, `case-${++folders}`);
  mkdirSync(out);
  chmodSync(out, 0o777);
  return out;
}

async function run(argv: string[], around?: <T>(work: () => Promise<T>) => Promise<T>) {
  return runInProcess(argv, env, around ? { cwd: dir, around } : { cwd: dir });
}

/** Every file under `root`, as relative paths. */
function filesUnder(root: string): string[] {
  return (readdirSync(root, { recursive: true, withFileTypes: true }) as import("node:fs").Dirent[])
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(root.length + 1))
    .sort();
}

beforeAll(async () => {
  const r = await run(["run", records, "--job", job, "-o", answers, "--max-error-rate", "0.5"]);
  expect(r.code, r.stderr).toBe(0);
  expect(readFileSync(errorsFile, "utf8")).toContain("T-bad");
  const exported = join(dir, "tasks.json");
  expect((await run(["labelstudio", "export", answers, "--job", job, "-o", exported])).code).toBe(0);
  const tasks = JSON.parse(readFileSync(exported, "utf8")) as LabelStudioTask[];
  writeFileSync(
    labelled,
    jsonExport(tasks, (t) => new Map(t.predictions[0]?.result.map((r) => [r.from_name, r.value.choices[0] as string]))),
  );
}, 60_000);

describe("one table of exit codes for every command", () => {
  it("each command on good files succeeds (the lines below are right)", async () => {
    for (const c of COMMANDS) {
      const out = folder();
      const r = await run(line(c, c.good(), out));
      expect(r.code, `${c.name}\n${r.stderr}`).toBe(0);
      // Each output it was given is there.
      for (const [, file] of c.outputs) expect(filesUnder(out), c.name).toContain(file);
    }
  }, 60_000);

  it("a missing primary input: 6; an empty one: 6, in one line (two for run's verdict)", async () => {
    for (const c of COMMANDS) {
      for (const input of [missing, empty]) {
        const out = folder();
        const r = await run(line(c, input, out));
        expect(r.code, `${c.name} ${input}\n${r.stderr}`).toBe(6);
        expect(r.stderr, c.name).toMatch(input === missing ? /missing\.jsonl/ : /empty|holds no (records|answers)/);
        expect(r.stderr.trimEnd().split("\n").length, `${c.name}\n${r.stderr}`).toBeLessThanOrEqual(c.name === "run" ? 5 : 1);
        expect(r.stdout, c.name).toBe("");
      }
    }
  }, 60_000);

  it("a missing --gold, --compare or --job: 2, naming the file", async () => {
    for (const c of COMMANDS) {
      const r = await run(line(c, c.good(), folder(), join(dir, "no-such-file.json")));
      expect(r.code, `${c.name}\n${r.stderr}`).toBe(2);
      expect(r.stderr, c.name).toMatch(/no-such-file\.json/);
    }
  }, 60_000);

  it("a file of another kind (a run's errors file, its usage summary, its journal): 2, naming what it is and what was expected", async () => {
    const kinds: [string, RegExp][] = [
      [errorsFile, /is a run's errors file \(one line per failed record\), not /],
      [usageFile, /is a run's usage summary, not /],
      [`${answers}.journal`, /is a run's journal, not /],
    ];
    for (const c of COMMANDS) {
      for (const [file, said] of kinds) {
        const out = folder();
        const r = await run(line(c, file, out));
        expect(r.code, `${c.name} ${file}\n${r.stderr}`).toBe(2);
        expect(r.stderr, c.name).toMatch(said);
        expect(r.stderr, c.name).toMatch(/not (answers typed-eval wrote|records to answer|a Label Studio export)/);
        expect(r.stdout, c.name).toBe("");
      }
    }
  }, 60_000);

  it("an output that cannot be written (a directory, a path through a file, a read-only folder): 2 before any work, nothing left behind", async () => {
    for (const c of COMMANDS) {
      for (const [flag, file] of c.outputs) {
        const bad: [string, string, RegExp][] = [
          ["a directory", join(dir, "a-directory"), /is a directory/],
          ["a path through a file", join(aFile, file), /is a file, not a folder/],
          ["a read-only folder", join(readOnly, file), /no permission|permission denied/i],
        ];
        for (const [what, place, said] of bad) {
          mkdirSync(join(dir, "a-directory"), { recursive: true });
          const out = folder();
          const argv = line(c, c.good(), out);
          argv[argv.indexOf(join(out, file))] = place;
          const r = what === "a read-only folder" ? await run(argv, unprivileged) : await run(argv);
          const label = `${c.name} ${flag} to ${what}`;
          expect(r.code, `${label}\n${r.stderr}`).toBe(2);
          expect(r.stderr, label).toMatch(new RegExp(`cannot write ${flag.replace("-o", "--output")} `));
          expect(r.stderr, label).toMatch(said);
          // No work was done: nothing on stdout, and no output made (a run's summaries, written for every verdict, say why it stopped).
          expect(r.stdout, label).toBe("");
          expect(
            filesUnder(out).filter((f) => !f.endsWith(".usage.json") && f !== "sj.json"),
            label,
          ).toEqual([]);
          expect(readdirSync(join(dir, "a-directory")), label).toEqual([]);
          expect(readdirSync(readOnly), label).toEqual([]);
        }
      }
    }
    // No probe or partial file anywhere in the test's folder.
    expect(filesUnder(dir).filter((f) => /\.partial$|\.typed-eval-check-/.test(f))).toEqual([]);
  }, 60_000);
});

describe("closing lines that add up", () => {
  /** The head line's counts: read, answered, deduplicated, from an earlier run, failed. */
  function head(stderr: string): number[] {
    const m = /^(\d+) records: (\d+) answered \((\d+) deduplicated, (\d+) from an earlier run\), (\d+) failed/m.exec(stderr);
    expect(m, stderr).not.toBeNull();
    return (m as RegExpExecArray).slice(1).map(Number);
  }
  const requests = (stderr: string) => Number(/^this run: (\d+) requests/m.exec(stderr)?.[1]);

  it("--limit 4, then --sample 5 on the same output: read = answered + failed, answered = asked + deduplicated + earlier, the output holds them", async () => {
    const tickets = resolve("examples/data/tickets.jsonl");
    const out = join(folder(), "o.jsonl");
    const first = await run(["run", tickets, "--job", job, "-o", out, "--limit", "4"]);
    expect(first.code, first.stderr).toBe(0);
    expect(head(first.stderr)).toEqual([4, 4, 0, 0, 0]);
    const second = await run(["run", tickets, "--job", job, "-o", out, "--sample", "5", "--seed", "2"]);
    expect(second.code, second.stderr).toBe(0);
    const [read, answered, deduplicated, earlier, failed] = head(second.stderr) as [number, number, number, number, number];
    expect(read).toBe(5);
    expect(answered + failed).toBe(read);
    // This sample shares records with the first four, and holds a repeated ticket: each part is counted once.
    expect(earlier).toBeGreaterThan(0);
    expect(earlier).toBeLessThanOrEqual(4);
    expect(requests(second.stderr) + deduplicated + earlier).toBe(answered);
    expect(readFileSync(out, "utf8").trim().split("\n")).toHaveLength(answered);
  }, 30_000);
});
