/**
 * A stand-in /v1/systemone upstream for benchmarks, run as its own process:
 * answers any valid request (tokens counted as characters / 4, the same rule
 * as the remote estimate), after a latency drawn from [min, max] ms, and
 * enforces a requests-per-minute and a tokens-per-second limit as exact
 * sliding windows, answering 429 beyond them. Prints its port on stdout;
 * GET /stats returns what it accepted and rejected.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { SystemOneRequest } from "../src/api/schema.js";
import { plausibleAnswers } from "../test/support/answers.js";

const [minMs, maxMs, rpm, tps] = process.argv.slice(2).map(Number) as [number, number, number, number];
const arrivals: { at: number; tokens: number }[] = [];
let head = 0;
const stats = { accepted: 0, rejected: 0, first: 0, last: 0 };

function admit(tokens: number): boolean {
  const now = Date.now();
  while (head < arrivals.length && arrivals[head]!.at <= now - 60_000) head++;
  if (head > 100_000) {
    arrivals.splice(0, head);
    head = 0;
  }
  let lastSecondTokens = 0;
  for (let i = arrivals.length - 1; i >= head && arrivals[i]!.at > now - 1000; i--) lastSecondTokens += arrivals[i]!.tokens;
  if (arrivals.length - head + 1 > rpm || lastSecondTokens + tokens > tps) return false;
  arrivals.push({ at: now, tokens });
  return true;
}

const server = createServer((req, res) => {
  if (req.url === "/stats") {
    res.end(JSON.stringify(stats));
    return;
  }
  let text = "";
  req.on("data", (c: Buffer) => (text += c.toString()));
  req.on("end", () => {
    const body = JSON.parse(text) as SystemOneRequest;
    const tokens = Math.ceil((JSON.stringify(body.state).length + JSON.stringify(body.questions).length) / 4);
    const ok = admit(tokens);
    const now = Date.now();
    if (ok) {
      stats.accepted++;
      stats.first ||= now;
      stats.last = now;
    } else stats.rejected++;
    const reply = () => {
      if (!ok) {
        res.writeHead(429, { "content-type": "application/json", "retry-after-ms": "200" });
        res.end('{"detail":"rate limit"}');
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ model: "bench-1.0.0", answers: plausibleAnswers(body.questions), usage: { input_tokens: tokens, output_tokens: 1 } }));
    };
    const delay = minMs + Math.random() * (maxMs - minMs);
    if (delay > 0) setTimeout(reply, delay);
    else reply();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
