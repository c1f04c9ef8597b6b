/** What every input is: a stream of records with progress, and the error that ends one. */
import { InvocationError } from "../../api/errors.js";

/** One input record, or why a line could not be read. `seq` numbers records across the whole input. */
export type SourceItem = { seq: number; line: number; source: string; record: unknown } | { seq: number; line: number; source: string; error: string };

export interface Source {
  name: string;
  items: AsyncIterable<SourceItem>;
  /** Bytes read so far and the total when known, for progress. */
  progress(): { bytes: number; total: number | undefined };
}

export class SourceError extends InvocationError {
  override name = "SourceError";
  /** The input is not there at all (no such file, key or objects under a prefix): a scheduler may map this to "skipped". */
  readonly absent: boolean;
  constructor(message: string, options: { absent?: boolean } = {}) {
    super(message);
    this.absent = options.absent ?? false;
  }
}
