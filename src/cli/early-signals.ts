/**
 * Signals that came while the CLI was loading (its imports take a second or
 * two): `bin/typed-eval.js` holds them from its first line, so a scheduler's
 * SIGTERM at the very start is not a silent death. `run` takes them over and
 * replays them into its own handling (the run ends `stopped`, its line and
 * summary written); any other command gets the default (the bin re-raises).
 */

/** Where the bin leaves what it held: a registered symbol, since the bin loads before any module of the CLI. */
const HELD = Symbol.for("typed-eval.early-signals");

interface Held {
  signals: NodeJS.Signals[];
  release(): void;
}

/** Stops holding signals and returns those received so far (none when the CLI was not started by the bin). */
export function takeEarlySignals(): NodeJS.Signals[] {
  const held = (process as unknown as Record<symbol, Held | undefined>)[HELD];
  if (!held) return [];
  held.release();
  return [...held.signals];
}
