/** The server benchmarks' client: POST /v1/systemone over a keep-alive `node:http` agent, in this process or in a child of its own. */
import { fork } from "node:child_process";
import { type Agent, request as httpRequest } from "node:http";
import { fileURLToPath } from "node:url";
import type { SystemOneRequest } from "../src/api/schema.js";
import { KEYS } from "../test/server/helpers.js";

/** A function that POSTs a request to the server on `port` and resolves when it answers 200. */
/** What the bench sends its client process (server-client.ts), and what comes back. */
export type ClientMessage = { post: number; port: number; body: SystemOneRequest } | { saturate: number; port: number; clients: number; seconds: number };
export type ClientReply = { post: number; sent: string; received: string } | { saturate: number; done: number; seconds: number } | { failed: string };

export function systemOnePoster(port: number, agent: Agent): (body: SystemOneRequest) => Promise<void> {
  return (body) =>
    new Promise<void>((resolve, reject) => {
      const req = httpRequest(
        {
          host: "127.0.0.1",
          port,
          path: "/v1/systemone",
          method: "POST",
          agent,
          headers: { authorization: `Bearer ${KEYS.all}`, "content-type": "application/json" },
        },
        (res) => {
          let text = "";
          res.on("data", (c: Buffer) => (text += c.toString()));
          res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}: ${text}`))));
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify(body));
    });
}

/**
 * The benchmarks' request: a short ticket, a noul and a 3-option choice. `tag` makes the record its own
 * (the engine keeps each sequence's prefix: a record seen before would find its state cached).
 */
export function benchRequest(tag: string, i: number): SystemOneRequest {
  return {
    state: { ticket: `Ticket ${tag}: my order ${"never arrived ".repeat(1 + (i % 8))}` },
    model: "tiny",
    questions: { refund: { type: "noul" }, team: { type: "choice", criteria: { a: null, b: null, c: null } } },
  };
}

/** An HTTP client in a child process (bench/server-client.ts), so its work runs beside the server's rather than inside it. */
export interface ForkedClient {
  /** POSTs `body`; resolves when the child has the whole answer. */
  post(port: number, body: SystemOneRequest): Promise<Posted>;
  /** Requests answered per second with `clients` requests kept in flight for `seconds`. */
  saturate(port: number, clients: number, seconds: number): Promise<number>;
  close(): void;
}

/** One request as the child saw it: its wall time, and when it was sent and answered on the machine's monotonic clock (process.hrtime.bigint). */
export interface Posted {
  ms: number;
  sent: bigint;
  received: bigint;
}

export async function forkClient(): Promise<ForkedClient> {
  // The child inherits this process's loader flags (tsx), so it runs the TypeScript as this process does.
  const child = fork(fileURLToPath(new URL("./server-client.ts", import.meta.url)), { stdio: "inherit" });
  await new Promise<void>((resolve, reject) => child.once("spawn", resolve).once("error", reject));
  let waiting: { resolve: (reply: ClientReply) => void; reject: (error: Error) => void } | undefined;
  child.on("message", (reply: ClientReply) => {
    const w = waiting;
    waiting = undefined;
    if ("failed" in reply) w?.reject(new Error(`bench client: ${reply.failed}`));
    else w?.resolve(reply);
  });
  child.on("exit", (code) => waiting?.reject(new Error(`bench client exited with code ${code}`)));
  let serial = 0;
  const ask = (message: ClientMessage) =>
    new Promise<ClientReply>((resolve, reject) => {
      waiting = { resolve, reject };
      child.send(message);
    });
  return {
    async post(port, body) {
      const reply = await ask({ post: serial++, port, body });
      if (!("sent" in reply)) throw new Error("bench client: unexpected reply");
      const sent = BigInt(reply.sent);
      const received = BigInt(reply.received);
      return { ms: Number(received - sent) / 1e6, sent, received };
    },
    async saturate(port, clients, seconds) {
      const reply = await ask({ saturate: serial++, port, clients, seconds });
      return "done" in reply ? reply.done / reply.seconds : Number.NaN;
    },
    close() {
      child.disconnect();
    },
  };
}
