/**
 * The server benchmarks' floor: node:http with the same evaluator and
 * nothing else (no auth, validation, limits, ids, metrics or log): parse,
 * evaluate, stringify, write. What any Node HTTP server pays on the machine.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { SystemOneRequest } from "../src/api/schema.js";
import type { ModelSet } from "../src/evaluator/evaluator.js";

/** Listens on a free loopback port; `beforeWrite` runs once the answer is serialised, just before it is written. */
export async function bareServer(evaluator: Pick<ModelSet, "evaluate">, beforeWrite?: () => void): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (text += chunk));
    req.on("end", () => {
      void evaluator
        .evaluate(JSON.parse(text) as SystemOneRequest)
        .then(({ response }) => {
          const json = JSON.stringify(response);
          beforeWrite?.();
          res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(json) });
          res.end(json);
        })
        .catch((error: unknown) => {
          console.error(error);
          res.writeHead(500, { "content-length": 0 }).end();
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as AddressInfo).port };
}
