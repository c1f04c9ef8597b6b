import type { Argv, CommandModule } from "yargs";
import type { ArgsOf } from "./args.js";
import { validateRequest } from "../api/validate.js";
import { EXIT } from "../api/exit-codes.js";
import { isStdin, readInput } from "./input.js";

function withValidateOptions<T>(y: Argv<T>) {
  return y.positional("file", { type: "string", describe: "request body JSON; - or omitted for stdin" });
}

/** `typed-eval validate <file>`: checks a request body and prints the 422 body it would get. */
export const validateCommand: CommandModule<object, ArgsOf<typeof withValidateOptions>> = {
  command: "validate [file]",
  describe: "Check a SystemOneRequest JSON file (or - for stdin) against the v1 contract",
  builder: withValidateOptions,
  handler: async ({ file }) => {
    let body: unknown;
    try {
      body = JSON.parse(await readInput(file));
    } catch (error) {
      process.stderr.write(`${isStdin(file) ? "stdin" : file}: ${(error as Error).message}\n`);
      process.exitCode = EXIT.usage;
      return;
    }
    const result = validateRequest(body);
    if (result.ok) {
      const count = Object.keys(result.value.questions).length;
      process.stdout.write(`valid: ${count} question${count === 1 ? "" : "s"} for model ${result.value.model}\n`);
      return;
    }
    process.stdout.write(`${JSON.stringify({ detail: result.errors }, null, 2)}\n`);
    process.exitCode = EXIT.usage;
  },
};
