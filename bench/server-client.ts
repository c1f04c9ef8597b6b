/**
 * The server benchmarks' HTTP client in a process of its own (`forkClient` in
 * http-client.ts starts it): its request building, parsing and writes then
 * run beside the server, as a real client's do, instead of counting in the
 * server's added latency.
 *
 * Messages in: `{ post, body }` POSTs one request and answers `{ post, sent,
 * received }`: just before the request is written and at the end of the
 * answer (process.hrtime.bigint() values, the machine's monotonic clock, so
 * the parent can place them among its own timestamps); `{ saturate, port, clients, seconds }` keeps `clients` requests in
 * flight for `seconds` and answers `{ saturate, done, seconds }`.
 */
import { Agent } from "node:http";
import { benchRequest, type ClientMessage, type ClientReply, systemOnePoster } from "./http-client.js";

const agent = new Agent({ keepAlive: true, maxSockets: 32 });
const posters = new Map<number, ReturnType<typeof systemOnePoster>>();
const posterFor = (port: number) => {
  let post = posters.get(port);
  if (!post) posters.set(port, (post = systemOnePoster(port, agent)));
  return post;
};
const reply = (message: ClientReply) => process.send?.(message);

process.on("message", (message: ClientMessage) => {
  void handle(message).catch((error: unknown) => reply({ failed: error instanceof Error ? error.message : String(error) }));
});
process.on("disconnect", () => agent.destroy());

async function handle(message: ClientMessage): Promise<void> {
  const post = posterFor(message.port);
  if ("post" in message) {
    const sent = process.hrtime.bigint();
    await post(message.body);
    reply({ post: message.post, sent: String(sent), received: String(process.hrtime.bigint()) });
    return;
  }
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
