/**
 * The server benchmarks' clients: POST /v1/systemone over a keep-alive
 * `node:http` agent, or as bytes on one keep-alive socket (the minimal
 * client), in this process or in a child of its own.
 */
import { fork } from "node:child_process";
import { type Agent, request as httpRequest } from "node:http";
import { connect, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import type { SystemOneRequest } from "../src/api/schema.js";
import { KEYS } from "../test/server/helpers.js";

/**
 * Which client posts: `node` is node:http's (a ClientRequest and an IncomingMessage stream per call, what
 * a Node caller typically uses); `minimal` writes the request's bytes on a socket and reads the answer by its
 * Content-Length, so that what it measures is the server and the loopback, not a client library's own work.
 */
export type ClientKind = "node" | "minimal";

/** What the bench sends its client process (server-client.ts), and what comes back. */
export type ClientMessage =
  | { post: number; port: number; body: SystemOneRequest; client: ClientKind }
  | { saturate: number; port: number; clients: number; seconds: number };
export type ClientReply = { post: number; sent: string; received: string } | { saturate: number; done: number; seconds: number } | { failed: string };

/** A function that POSTs a request to the server on `port` and resolves when it answers 200. */
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
 * The minimal client: one keep-alive socket, the request written as one HTTP/1.1 message, the answer
 * framed by its Content-Length (the server always sends one). One request at a time.
 */
export function minimalPoster(port: number): { post: (body: SystemOneRequest) => Promise<void>; close: () => void } {
  let socket: Socket | undefined;
  let received: Buffer = Buffer.alloc(0);
  let waiting: { resolve: () => void; reject: (error: Error) => void } | undefined;
  const settle = (error?: Error) => {
    const w = waiting;
    waiting = undefined;
    if (error) w?.reject(error);
    else w?.resolve();
  };
  const onData = (chunk: Buffer) => {
    received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
    const end = received.indexOf("\r\n\r\n");
    if (end < 0 || !waiting) return;
    const head = received.subarray(0, end).toString("latin1");
    const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? Number.NaN);
    if (Number.isNaN(length)) {
      socket?.destroy();
      return settle(new Error(`answer without Content-Length: ${head.split("\r\n")[0]}`));
    }
    if (received.length < end + 4 + length) return;
    const body = received.subarray(end + 4, end + 4 + length).toString("utf8");
    received = received.subarray(end + 4 + length);
    settle(head.startsWith("HTTP/1.1 200 ") ? undefined : new Error(`${head.split("\r\n")[0]}: ${body}`));
  };
  const open = () => {
    const s = connect({ host: "127.0.0.1", port, noDelay: true });
    received = Buffer.alloc(0);
    // Events of a connection already replaced say nothing of the current request.
    const lost = (error: Error) => {
      if (socket !== s) return;
      socket = undefined;
      settle(error);
    };
    s.on("data", (chunk: Buffer) => socket === s && onData(chunk));
    s.on("error", lost);
    s.on("close", () => lost(new Error("the server closed the connection")));
    return s;
  };
  return {
    post: (body) =>
      new Promise<void>((resolve, reject) => {
        if (waiting) throw new Error("the minimal client sends one request at a time");
        const json = JSON.stringify(body);
        waiting = { resolve, reject };
        socket ??= open();
        socket.write(
          `POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${KEYS.all}\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
        );
      }),
    close: () => socket?.destroy(),
  };
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
  /** POSTs `body` with the `client` kind (default node:http); resolves when the child has the whole answer. */
  post(port: number, body: SystemOneRequest, client?: ClientKind): Promise<Posted>;
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
    async post(port, body, client = "node") {
      const reply = await ask({ post: serial++, port, body, client });
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
