import type { Argv, CommandModule } from "yargs";
import type { ArgsOf } from "./args.js";
import { validateRequest } from "../api/validate.js";
import { describeSystemError } from "../api/system-errors.js";
import { Told } from "./boundary.js";
import { UsageError } from "./exit.js";
import { isStdin, readInput, requireInput } from "./input.js";

function withValidateOptions<T>(y: Argv<T>) {
  return y.positional("file", { type: "string", describe: "request body JSON; - or omitted for stdin" });
}

/** `typed-eval validate <file>`: checks a request body and prints the 422 body it would get. */
export const validateCommand: CommandModule<object, ArgsOf<typeof withValidateOptions>> = {
  command: "validate [file]",
  describe: "Check a SystemOneRequest JSON file (or - for stdin) against the v1 contract",
  builder: withValidateOptions,
  handler: async ({ file }) => {
    requireInput(file, "request file");
    let body: unknown;
    try {
      body = JSON.parse(await readInput(file));
    } catch (error) {
      throw new UsageError(`${isStdin(file) ? "stdin" : file}: ${describeSystemError(error) ?? (error as Error).message}`);
    }
    const result = validateRequest(body);
    if (result.ok) {
      const count = Object.keys(result.value.questions).length;
      process.stdout.write(`valid: ${count} question${count === 1 ? "" : "s"} for model ${result.value.model}\n`);
      return;
    }
    // The 422 body is the answer, on stdout; the exit code says it is a refusal.
    process.stdout.write(`${JSON.stringify({ detail: result.errors }, null, 2)}\n`);
    throw new Told({ verdict: "bad-input", reason: "the request is not valid" });
  },
};
