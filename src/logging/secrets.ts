/**
 * The one scrubber: every text typed-eval writes that may carry what an
 * endpoint said (an error body, an echoed header, a message built from
 * them) passes through `scrub` on its way to a log line, the journal, a
 * summary, the errors file or stderr. Secrets are registered by value when
 * they are read (`secret` in api/env.ts registers every API key), and any
 * piece of one at least `FRAGMENT` characters long is replaced: a key cut
 * short by a one-line message (`te_9f3k…`), its tail, or its middle. A
 * `Bearer <token>` credential is replaced whatever the token, registered or
 * not.
 *
 * Why by value and not by field: an S3 store answering a wrong `--base-url`
 * echoes the Authorization header inside an XML error body, which becomes
 * the text of an error; no field name marks it there.
 */

/** What a scrubbed piece reads as, in every file and stream. */
export const REDACTED = "[redacted]";

/**
 * The shortest piece of a secret taken for it. Shorter secrets are not
 * registered (replacing every "abc" would corrupt what is written, and such
 * a key protects nothing anyway); a `Bearer` token is still scrubbed.
 */
export const FRAGMENT = 8;

/** Every FRAGMENT-long piece of every registered form of every secret. */
const pieces = new Set<string>();
const registered = new Set<string>();

/** A bearer credential, as an Authorization header or an echo of one shows it (6 characters or more: not the prose "Bearer <API key>"). */
const CREDENTIAL = /\b(Bearer)(\s+)(?!\[redacted\])[^\s"'`<>,;&)\]}]{6,}/gi;

/**
 * Registers a secret: from now on no text that passes `scrub` shows it, or
 * any piece of it of `FRAGMENT` characters or more. Its JSON-escaped and
 * URL-encoded forms are registered too (a key echoed inside JSON, or in a
 * query string). A value shorter than `FRAGMENT` is not registered.
 */
export function registerSecret(value: string | undefined): void {
  if (value === undefined || value.length < FRAGMENT || registered.has(value)) return;
  registered.add(value);
  for (const form of new Set([value, JSON.stringify(value).slice(1, -1), encodeURIComponent(value)])) {
    for (let i = 0; i + FRAGMENT <= form.length; i++) pieces.add(form.slice(i, i + FRAGMENT));
  }
}

/** Whether any secret is registered (for tests; `scrub` costs nothing while none is). */
export function hasSecrets(): boolean {
  return registered.size > 0;
}

/** Forgets every registered secret (tests only: a process keeps its keys' scrubbing for its whole life). */
export function forgetSecrets(): void {
  registered.clear();
  pieces.clear();
}

/**
 * The text with every registered secret, every piece of one at least
 * `FRAGMENT` characters long, and every `Bearer` credential
 * replaced by `[redacted]`. Text without any is returned as it is.
 */
export function scrub(text: string): string {
  const bare = text.replace(CREDENTIAL, `$1$2${REDACTED}`);
  if (pieces.size === 0 || bare.length < FRAGMENT) return bare;
  // Each run of characters covered by pieces of a secret, overlapping or touching pieces joined.
  const runs: [number, number][] = [];
  for (let i = 0; i + FRAGMENT <= bare.length; i++) {
    if (!pieces.has(bare.slice(i, i + FRAGMENT))) continue;
    const last = runs[runs.length - 1];
    if (last && i <= last[1]) last[1] = i + FRAGMENT;
    else runs.push([i, i + FRAGMENT]);
  }
  if (runs.length === 0) return bare;
  let out = "";
  let from = 0;
  for (const [start, end] of runs) {
    out += bare.slice(from, start) + REDACTED;
    // A run ending on a backslash would leave half a JSON escape: its escaped character goes too.
    from = Math.max(from, bare[end - 1] === "\\" ? end + 1 : end);
  }
  return out + bare.slice(from);
}

/** The JSON text of a value, scrubbed: for whole documents (a summary) written where anyone may read them. */
export function scrubbedJson(value: unknown, space?: number): string {
  return scrub(JSON.stringify(value, null, space));
}
