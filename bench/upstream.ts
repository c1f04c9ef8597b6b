/**
 * A stand-in /v1/systemone upstream for benchmarks, run as its own process:
 * answers any valid request (tokens counted as characters / 4, the same rule
 * as the remote estimate), after a latency drawn from [min, max] ms, and
 * enforces a requests-per-minute and a tokens-per-second limit as exact
 * sliding windows, answering 429 beyond them (with `retry-after-ms` unless
 * `silent`). Faults per attempt: `p529`, `p500`, `pReset` (a destroyed
 * socket). `bodyBytes`: every answer padded to about that many bytes, sent
 * in 1 MiB chunks with no length declared (as it is written, the reader's pace).
 * `POST /storm?ms=N` answers every attempt 529 for N ms. Prints its
 * port on stdout; GET /stats returns what it accepted and rejected, with
 * per-second counts of attempts and accepted requests.
 *
 * Usage: upstream.ts '{"minMs":50,"maxMs":150,"rpm":6000,"tps":1e9,...}'
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { SystemOneRequest } from "../src/api/schema.js";
import { plausibleAnswers } from "../test/support/answers.js";

export interface UpstreamConfig {
  minMs: number;
  maxMs: number;
  rpm: number;
  tps: number;
  /** Requests in any sliding second, beyond the per-minute limit (a short run meets it at once). */
  rps?: number;
  p529?: number;
  p500?: number;
  pReset?: number;
  /** 429 beyond the limits without any retry header (an endpoint that does not say how long). */
  silent?: boolean;
  /** Pad every answer to about this many bytes, streamed in chunks with no content-length. */
  bodyBytes?: number;
}

const CHUNK = Buffer.alloc(1 << 16, "x");

/** Writes `json` with a pad field of about `bytes` bytes, at the pace the reader takes it; stops when the reader hangs up. */
async function padded(res: ServerResponse, json: object, bytes: number): Promise<void> {
  res.writeHead(200, { "content-type": "application/json" });
  res.write(`${JSON.stringify(json).slice(0, -1)},"pad":"`);
  for (let sent = 0; sent < bytes && !res.destroyed; sent += CHUNK.length) {
    if (res.write(CHUNK)) continue;
    await new Promise<void>((resolve) => {
      const go = () => {
        res.off("drain", go).off("close", go);
        resolve();
      };
      res.on("drain", go).on("close", go);
    });
  }
  res.end('"}');
}

const config = JSON.parse(process.argv[2] ?? "{}") as UpstreamConfig;
const arrivals: { at: number; tokens: number }[] = [];
let head = 0;
let stormUntil = 0;
const started = Date.now();
const stats = {
  accepted: 0,
  rejected: 0,
  overloaded: 0,
  failed: 0,
  reset: 0,
  first: 0,
  last: 0,
  attemptsPerSecond: [] as number[],
  acceptedPerSecond: [] as number[],
};

function bump(series: number[]): void {
  const second = Math.floor((Date.now() - started) / 1000);
  while (series.length <= second) series.push(0);
  series[second]!++;
}

function admit(tokens: number): boolean {
  const now = Date.now();
  while (head < arrivals.length && arrivals[head]!.at <= now - 60_000) head++;
  if (head > 100_000) {
    arrivals.splice(0, head);
    head = 0;
  }
  let lastSecondTokens = 0;
  let lastSecondRequests = 0;
  for (let i = arrivals.length - 1; i >= head && arrivals[i]!.at > now - 1000; i--) {
    lastSecondTokens += arrivals[i]!.tokens;
    lastSecondRequests++;
  }
  if (arrivals.length - head + 1 > config.rpm || lastSecondTokens + tokens > config.tps || lastSecondRequests + 1 > (config.rps ?? Infinity)) return false;
  arrivals.push({ at: now, tokens });
  return true;
}

const server = createServer((req, res) => {
  if (req.url === "/stats") {
    res.end(JSON.stringify(stats));
    return;
  }
  if (req.url?.startsWith("/storm")) {
    stormUntil = Date.now() + Number(new URL(req.url, "http://x").searchParams.get("ms"));
    res.end("{}");
    return;
  }
  let text = "";
  req.on("data", (c: Buffer) => (text += c.toString()));
  req.on("end", () => {
    bump(stats.attemptsPerSecond);
    const body = JSON.parse(text) as SystemOneRequest;
    const tokens = Math.ceil((JSON.stringify(body.state).length + JSON.stringify(body.questions).length) / 4);
    const x = Math.random();
    const storm = Date.now() < stormUntil;
    let outcome: "ok" | "429" | "529" | "500" | "reset";
    if (storm || x < (config.p529 ?? 0)) outcome = "529";
    else if (x < (config.p529 ?? 0) + (config.p500 ?? 0)) outcome = "500";
    else if (x < (config.p529 ?? 0) + (config.p500 ?? 0) + (config.pReset ?? 0)) outcome = "reset";
    else outcome = admit(tokens) ? "ok" : "429";
    const now = Date.now();
    if (outcome === "ok") {
      stats.accepted++;
      bump(stats.acceptedPerSecond);
      stats.first ||= now;
      stats.last = now;
    } else if (outcome === "429") stats.rejected++;
    else if (outcome === "529") stats.overloaded++;
    else if (outcome === "500") stats.failed++;
    else stats.reset++;
    const reply = () => {
      switch (outcome) {
        case "reset":
          return void req.socket.destroy();
        case "429":
          res.writeHead(429, { "content-type": "application/json", ...(config.silent ? {} : { "retry-after-ms": "200" }) });
          return void res.end('{"detail":"rate limit"}');
        case "529":
          res.writeHead(529, { "content-type": "application/json" });
          return void res.end('{"detail":"overloaded"}');
        case "500":
          res.writeHead(500, { "content-type": "application/json" });
          return void res.end('{"detail":"internal error"}');
        case "ok": {
          const answer = { model: "bench-1.0.0", answers: plausibleAnswers(body.questions), usage: { input_tokens: tokens, output_tokens: 1 } };
          if (config.bodyBytes) return void padded(res, answer, config.bodyBytes);
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify(answer));
        }
      }
    };
    const delay = config.minMs + Math.random() * (config.maxMs - config.minMs);
    if (delay > 0) setTimeout(reply, delay);
    else reply();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
