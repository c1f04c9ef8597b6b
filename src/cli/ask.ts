import { readFile } from "node:fs/promises";
import type { Argv, CommandModule } from "yargs";
import { validateRequest } from "../api/validate.js";
import { UnprocessableEntityError } from "../api/errors.js";
import { Told } from "./boundary.js";
import { UsageError } from "./exit.js";
import { isStdin, readInput, requireInput } from "./input.js";
import { describeSystemError } from "../api/system-errors.js";
import { openModelFromArgs, withModelOptions } from "./model-options.js";
import type { ArgsOf } from "./args.js";

function withAskOptions<T>(y: Argv<T>) {
  return withModelOptions(
    y
      .option("questions", {
        alias: "q",
        type: "string",
        demandOption: true,
        describe: "JSON file with a `questions` map (a job file or a request body)",
      })
      .option("state", { alias: "s", type: "string", describe: "state file (JSON, or text with --text); - or omitted for stdin" })
      .option("text", { type: "boolean", default: false, describe: "send the state as text even if it parses as JSON" })
      .option("diagnostics", { type: "boolean", default: false, describe: "also print each answer's label mass" })
      .option("print-prompt", { type: "boolean", default: false, describe: "print the exact text the model reads, instead of answering" }),
  );
}

/** `typed-eval ask`: one request from the command line; prints the response JSON. */
export const askCommand: CommandModule<object, ArgsOf<typeof withAskOptions>> = {
  command: "ask",
  describe: "Answer one request: a state from a file or stdin, questions from a job file",
  builder: withAskOptions,
  handler: async (args) => {
    let questions: unknown;
    try {
      const file = JSON.parse(await readFile(args.questions, "utf8")) as { questions?: unknown; model?: unknown };
      questions = file.questions;
      if (typeof file.model === "string" && args.model === "default") args.model = file.model;
    } catch (error) {
      throw new UsageError(`${args.questions}: ${describeSystemError(error) ?? (error as Error).message}`);
    }
    requireInput(args.state, "state file");
    let raw: string;
    try {
      raw = await readInput(args.state);
    } catch (error) {
      throw new UsageError(
        `cannot read the state ${args.state}: ${(error as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (describeSystemError(error) ?? (error as Error).message)}`,
      );
    }
    // Nothing piped in (or an empty file) is a mistake, not a state to ask about.
    if (raw.trim() === "") {
      throw new UsageError(
        isStdin(args.state)
          ? "the state is empty: nothing came on stdin; pipe a state in (echo '{...}' | typed-eval ask ...) or name a file with --state"
          : `the state ${args.state} is empty: name a file that holds the state`,
      );
    }
    let state: unknown = raw;
    if (!args.text) {
      try {
        state = JSON.parse(raw);
      } catch {
        state = raw;
      }
    }
    const checked = validateRequest({ state, model: args.model, questions });
    if (!checked.ok) {
      process.stderr.write(`${JSON.stringify({ detail: checked.errors }, null, 2)}\n`);
      throw new Told({ verdict: "bad-input", reason: "the request is not valid" });
    }
    const evaluator = await openModelFromArgs(args);
    if (args["print-prompt"]) {
      try {
        process.stdout.write(evaluator.promptText(checked.value));
      } finally {
        await evaluator.close();
      }
      return;
    }
    try {
      const { response, labelMass } = await evaluator.evaluate(checked.value);
      const out = args.diagnostics ? { ...response, diagnostics: { label_mass: labelMass } } : response;
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    } catch (error) {
      if (!(error instanceof UnprocessableEntityError)) throw error;
      process.stderr.write(`${JSON.stringify(error.body(), null, 2)}\n`);
      throw new Told({ verdict: "bad-input", reason: "the request is not valid" });
    } finally {
      await evaluator.close();
    }
  },
};
