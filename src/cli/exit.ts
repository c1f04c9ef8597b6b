import { InvocationError } from "../api/errors.js";

/** A bad argument value: one line on stderr, exit 2. */
export class UsageError extends InvocationError {
  override name = "UsageError";
}
