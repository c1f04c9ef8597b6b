/**
 * The server benchmarks' HTTP client in a process of its own (`forkClient` in
 * http-client.ts starts it): its request building, parsing and writes then
 * run beside the server, as a real client's do, instead of counting in the
 * server's added latency.
 *
 * Messages in: `{ post, body, client }` POSTs one request with that client
 * (node:http or the minimal one, see http-client.ts) and answers `{ post, sent,
 * received }`: just before the request is written and at the end of the
 * answer (process.hrtime.bigint() values, the machine's monotonic clock, so
 * the parent can place them among its own timestamps); `{ saturate, port, clients, seconds }` keeps `clients` requests in
 * flight for `seconds` and answers `{ saturate, done, seconds }`.
 */
import { Agent } from "node:http";
import type { SystemOneRequest } from "../src/api/schema.js";
import { benchRequest, type ClientKind, type ClientMessage, type ClientReply, minimalPoster, systemOnePoster } from "./http-client.js";

const agent = new Agent({ keepAlive: true, maxSockets: 32 });
const posters = new Map<string, (body: SystemOneRequest) => Promise<void>>();
const minimal: ReturnType<typeof minimalPoster>[] = [];
const posterFor = (port: number, client: ClientKind = "node") => {
  let post = posters.get(`${client} ${port}`);
  if (!post) {
    if (client === "node") post = systemOnePoster(port, agent);
    else {
      const m = minimalPoster(port);
      minimal.push(m);
      post = m.post;
    }
    posters.set(`${client} ${port}`, post);
  }
  return post;
};
const reply = (message: ClientReply) => process.send?.(message);

process.on("message", (message: ClientMessage) => {
  void handle(message).catch((error: unknown) => reply({ failed: error instanceof Error ? error.message : String(error) }));
});
process.on("disconnect", () => {
  agent.destroy();
  for (const m of minimal) m.close();
});

async function handle(message: ClientMessage): Promise<void> {
  if ("post" in message) {
    const post = posterFor(message.port, message.client);
    const sent = process.hrtime.bigint();
    await post(message.body);
    reply({ post: message.post, sent: String(sent), received: String(process.hrtime.bigint()) });
    return;
  }
  const post = posterFor(message.port);
  let done = 0;
  const until = Date.now() + message.seconds * 1000;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: message.clients }, async (_, c) => {
      for (let i = c; Date.now() < until; i += message.clients) {
        await post(benchRequest(`saturation ${c}.${i}`, i));
        done++;
      }
    }),
  );
  reply({ saturate: message.saturate, done, seconds: Number(process.hrtime.bigint() - start) / 1e9 });
}
