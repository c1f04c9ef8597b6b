import type { Argv } from "yargs";
import { env } from "../api/env.js";

/** The accounts file option shared by `serve` and `keys`. */
export function accountsFileOption<T>(y: Argv<T>) {
  return y.option("accounts-file", {
    type: "string",
    default: env("TYPED_EVAL_ACCOUNTS_FILE"),
    describe: "accounts and key hashes ($TYPED_EVAL_ACCOUNTS_FILE)",
  });
}
