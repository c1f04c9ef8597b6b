/**
 * The Label Studio recipe of docs/quality.md runs as written, on the bundled
 * job and tickets and the tiny generated model: every command line of the
 * block, in order, each exit 0. Where the block hands over to a person in
 * Label Studio, a JSON export is written as Label Studio writes one
 * (fixtures/labelstudio-exports.ts), labelled with the model's own answers
 * but on every fourth task; then the rest of the block runs against it.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import type { LabelStudioTask } from "../../src/quality/labelstudio.js";
import { runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";
import { jsonExport } from "./fixtures/labelstudio-exports.js";

const ROOT = resolve(import.meta.dirname, "../..");

/** The person agrees with the model, but turns a yes/no answer over when `turn`. */
const flip = (choice: string, turn: boolean) => (turn && choice === "yes" ? "no" : turn && choice === "no" ? "yes" : choice);

/** The shell block of the section, as lines. */
function recipe(): string[] {
  const doc = readFileSync(join(ROOT, "docs/quality.md"), "utf8");
  const block = /## Reviewing in Label Studio[\s\S]*?```sh\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error("docs/quality.md has no sh block under 'Reviewing in Label Studio'");
  return block.split("\n").filter((l) => l.trim() !== "");
}

describe("docs/quality.md: reviewing in Label Studio", () => {
  it("runs as written on the bundled job, up to the person's step and after it", { timeout: 120_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "te-recipe-"));
    mkdirSync(join(dir, "examples/data"), { recursive: true });
    mkdirSync(join(dir, "jobs"), { recursive: true });
    copyFileSync(join(ROOT, "examples/data/tickets.jsonl"), join(dir, "examples/data/tickets.jsonl"));
    copyFileSync(join(ROOT, "jobs/support-triage.json"), join(dir, "jobs/support-triage.json"));
    const env = { TYPED_EVAL_MODEL_PATH: generatedModel(TINY), TYPED_EVAL_LOG_LEVEL: "warn" };
    const vars: Record<string, string> = {};
    let person = false;
    const ran: string[] = [];
    for (const line of recipe()) {
      const assignment = /^(\w+)=(\S+)$/.exec(line);
      if (assignment) {
        vars[assignment[1] as string] = assignment[2] as string;
        continue;
      }
      if (line.startsWith("#")) {
        if (person) continue;
        person = true;
        // The person's step: the tasks as exported, labelled in Label Studio and exported as JSON to the path the block names.
        const tasks = JSON.parse(readFileSync(join(dir, "out/tasks.json"), "utf8")) as LabelStudioTask[];
        const tickets = readFileSync(join(dir, "examples/data/tickets.jsonl"), "utf8")
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as { ticket_id: string; ticket: unknown });
        // The bundled job does not keep its state: every task shows the ticket the model read all the same.
        for (const t of tasks) {
          const ticket = tickets.find((x) => x.ticket_id === t.data["te_id"]);
          expect(JSON.parse(t.data["te_state"] as string)).toEqual(ticket?.ticket);
        }
        const config = readFileSync(join(dir, "out/config.xml"), "utf8");
        expect(config).toContain('toName="te_text_state"');
        const target = /->\s*(\S+)/.exec(recipe().find((l) => l.includes("Export:")) ?? "")?.[1] ?? "out/export.json";
        writeFileSync(
          join(dir, target),
          jsonExport(tasks, (t, i) => new Map(t.predictions[0]!.result.map((r) => [r.from_name, flip(r.value.choices[0] as string, i % 4 === 0)]))),
        );
        continue;
      }
      expect(line, "every command of the block is npx typed-eval").toMatch(/^npx typed-eval /);
      const args = line
        .replace(/^npx typed-eval /, "")
        .replace(/\$(\w+)/g, (_, name: string) => vars[name] ?? "")
        .split(/\s+/);
      const r = await runInProcess(args, env, { cwd: dir });
      expect(r.code, `${line}\n${r.stderr}`).toBe(0);
      ran.push(args[0] === "labelstudio" ? `labelstudio ${args[1]}` : (args[0] as string));
    }
    expect(person).toBe(true);
    expect(ran).toEqual(["run", "labelstudio export", "assess", "calibrate", "run"]);
  });
});
