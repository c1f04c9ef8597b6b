/** The server benchmarks' client: POST /v1/systemone over a keep-alive `node:http` agent, resolving on a 200. */
import { type Agent, request as httpRequest } from "node:http";
import type { SystemOneRequest } from "../src/api/schema.js";
import { KEYS } from "../test/server/helpers.js";

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
