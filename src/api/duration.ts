/**
 * How a duration is written wherever typed-eval reads one (a flag, an
 * environment variable): a number with a unit (`500ms`, `30s`, `2m`, `1h`),
 * or a bare number, which is seconds. The CLI's checks and messages are in
 * `src/cli/duration.ts`; this is the parser they and the runner share.
 */

const UNIT_SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600 };

export interface Duration {
  seconds: number;
  /** No unit was written. */
  bare: boolean;
}

/** Parses `30s`, `500ms`, `1.5m`, `2h` or a bare `30` (seconds); undefined when it is none of these, or negative. */
export function parseDuration(text: string): Duration | undefined {
  const match = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h)?\s*$/i.exec(text);
  if (!match) return undefined;
  const unit = match[2]?.toLowerCase();
  const factor = unit === undefined ? 1 : UNIT_SECONDS[unit];
  if (factor === undefined) return undefined;
  return { seconds: Number(match[1]) * factor, bare: unit === undefined };
}
