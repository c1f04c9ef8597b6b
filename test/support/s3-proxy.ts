/**
 * A fault-injecting HTTP proxy in front of a real S3-compatible server
 * (s3rver, path-style addressing): requests pass through unchanged until a
 * rule matches, then get a status (503, 403, ...) with an S3 error body, or
 * their connection reset. Rules can be set and cleared at any moment.
 */
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface FaultRule {
  /** HTTP method to match (GET, PUT, POST, DELETE, HEAD); any when absent. */
  method?: string;
  /** Matched against `/bucket/key?query`; any when absent. */
  path?: RegExp;
  /** Answer with this status instead of forwarding. */
  status?: number;
  /** Drop the connection without an answer. */
  reset?: boolean;
}

export interface S3Proxy {
  /** `http://127.0.0.1:<port>`: set as AWS_ENDPOINT_URL_S3. */
  url: string;
  /** Replaces the rules (an empty list lets everything through). */
  faults(rules: FaultRule[]): void;
  /** Requests seen and how many a rule answered. */
  counts: { seen: number; faulted: number };
  close(): Promise<void>;
}

const CODES: Record<number, string> = { 403: "AccessDenied", 500: "InternalError", 503: "ServiceUnavailable" };

/** Starts the proxy on a free loopback port, forwarding to `target` (`http://127.0.0.1:<port>`). */
export async function startS3Proxy(target: string): Promise<S3Proxy> {
  const to = new URL(target);
  let rules: FaultRule[] = [];
  const counts = { seen: 0, faulted: 0 };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    counts.seen++;
    const rule = rules.find((r) => (!r.method || r.method === req.method) && (!r.path || r.path.test(req.url ?? "")));
    if (rule) {
      counts.faulted++;
      req.resume();
      if (rule.reset || rule.status === undefined) return void req.socket.destroy();
      const code = CODES[rule.status] ?? "Error";
      res.writeHead(rule.status, { "content-type": "application/xml" });
      return void res.end(
        req.method === "HEAD" ? undefined : `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>injected</Message></Error>`,
      );
    }
    const forward = request({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on("error", () => req.socket.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    faults: (next) => {
      rules = next;
    },
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
