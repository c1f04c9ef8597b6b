/**
 * The client retry convention of spec section 7, in one place: which statuses
 * are retried, how long to wait, and the abortable wait itself (used by the
 * remote client's retries and by the runner's limiter and sender).
 */
export interface RetryPolicy {
  maxRetries: number;
  /** First backoff delay; doubles each attempt. */
  initialMs: number;
  maxBackoffMs: number;
  /** Up to this share of each backoff delay is subtracted at random. */
  jitter: number;
  /** A server-given delay above this is ignored in favour of backoff. */
  maxServerDelayMs: number;
}

/** Official clients' defaults: 2 retries, 500 ms doubling to 5 s, 25% jitter, server delays up to 60 s. */
export const DEFAULT_RETRY: RetryPolicy = {
  maxRetries: 2,
  initialMs: 500,
  maxBackoffMs: 5_000,
  jitter: 0.25,
  maxServerDelayMs: 60_000,
};

/** Minimal view of response headers (fetch `Headers` fits). */
export interface HeaderSource {
  get(name: string): string | null;
}

/** The delay a response asks for: `retry-after-ms` first, then `retry-after` (seconds or an HTTP date). */
export function serverDelayMs(headers: HeaderSource, now: number = Date.now()): number | undefined {
  const ms = headers.get("retry-after-ms");
  if (ms !== null && ms.trim() !== "" && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Number(ms);
  const after = headers.get("retry-after");
  if (after === null || after.trim() === "") return undefined;
  const seconds = Number(after);
  if (Number.isFinite(seconds)) return seconds >= 0 ? seconds * 1000 : undefined;
  const date = Date.parse(after);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Exponential backoff for a zero-based retry attempt, with jitter subtracted. */
export function backoffMs(attempt: number, policy: RetryPolicy = DEFAULT_RETRY, random: () => number = Math.random): number {
  const base = Math.min(policy.initialMs * 2 ** attempt, policy.maxBackoffMs);
  return base * (1 - policy.jitter * random());
}

/** How long to wait before retry `attempt` (zero-based): the server's delay when given and sane, else backoff. */
export function retryDelayMs(
  attempt: number,
  headers: HeaderSource | undefined,
  policy: RetryPolicy = DEFAULT_RETRY,
  random: () => number = Math.random,
): number {
  const server = headers ? serverDelayMs(headers) : undefined;
  if (server !== undefined && server <= policy.maxServerDelayMs) return server;
  return backoffMs(attempt, policy, random);
}

/** Waits `ms`; rejects with the signal's reason as soon as it aborts (or at once when it already has). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
