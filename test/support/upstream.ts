/** A stand-in `/v1/systemone` endpoint for tests: reads each request's body, then lets the test answer. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Upstream {
  server: Server;
  /** `http://127.0.0.1:<port>`, without a path. */
  url: string;
  close(): Promise<void>;
}

/**
 * Listens on a free loopback port; `handle` gets each request with its whole
 * body as text. A run's first contact (`GET /v1/models`, which nobody bills)
 * goes to `models` when given, else is answered with an empty listing, so a
 * handler scripting the POSTs sees only those.
 */
export async function startUpstream(
  handle: (req: IncomingMessage, res: ServerResponse, text: string) => void,
  models?: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<Upstream> {
  const server = createServer((req, res) => {
    let text = "";
    req.on("data", (c: Buffer) => (text += c.toString()));
    req.on("end", () => {
      if (req.method !== "GET" || !req.url?.endsWith("/v1/models")) return handle(req, res, text);
      if (models) return models(req, res);
      sendJson(res, 200, { models: [] });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    server,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Answers with a JSON body (a string payload is sent as it is, to send broken JSON). */
export function sendJson(res: ServerResponse, status: number, payload: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(typeof payload === "string" ? payload : JSON.stringify(payload));
}
