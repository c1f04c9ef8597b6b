/**
 * A fault-injecting HTTP proxy in front of a real S3-compatible server
 * (s3rver, path-style addressing): requests pass through unchanged until a
 * rule matches, then get a status (503, 403, ...) with an S3 error body,
 * their connection reset, a delay, or their answer cut after some bytes.
 * Rules can be set and cleared at any moment.
 *
 * s3rver ignores conditional writes and reads (`If-None-Match: *` and
 * `If-Match` on PUT, `If-Match` on GET, HEAD and DELETE). The proxy honours
 * them as S3 does (412 when the condition fails, 404 for `If-Match` on a key
 * that is not there), checking and forwarding one write to a key at a time,
 * so the tests run against a store that has them; `conditional(false)` turns
 * that off, for a store that has none. Reads of a key wait for its write, as
 * S3's atomic replace has it (see `KeyGate`): a test that plays another
 * writer beside a run writes through the proxy (`S3Store.proxied`).
 */
import { createHash } from "node:crypto";
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { S3Client } from "@aws-sdk/client-s3";
import S3rver from "s3rver";

export interface FaultRule {
  /** HTTP method to match (GET, PUT, POST, DELETE, HEAD); any when absent. */
  method?: string;
  /** Matched against `/bucket/key?query`; any when absent. */
  path?: RegExp;
  /** Answer with this status instead of forwarding. */
  status?: number;
  /** Drop the connection without an answer. */
  reset?: boolean;
  /** Forward, but only after this many milliseconds. */
  delayMs?: number;
  /** Forward, and drop the connection once this many bytes of the answer's body have passed. */
  cutAfterBytes?: number;
  /** With `cutAfterBytes`: awaited at the cut, before the connection drops (to change the object meanwhile). */
  atCut?: () => Promise<void>;
  /** How many requests the rule takes before it lapses; all of them when absent. */
  times?: number;
  /** Matched against the request itself (its headers: a conditional write in one ETag form); any when absent. */
  when?: (req: IncomingMessage) => boolean;
}

export interface S3Proxy {
  /** `http://127.0.0.1:<port>`: set as AWS_ENDPOINT_URL_S3. */
  url: string;
  /** Replaces the rules (an empty list lets everything through). */
  faults(rules: FaultRule[]): void;
  /** Whether conditional requests are honoured (on when the proxy starts). */
  conditional(on: boolean): void;
  /** Requests seen, how many a rule took, and how many conditions failed (412). */
  counts: { seen: number; faulted: number; preconditionFailed: number };
  close(): Promise<void>;
}

const CODES: Record<number, string> = {
  403: "AccessDenied",
  404: "NoSuchKey",
  412: "PreconditionFailed",
  500: "InternalError",
  503: "ServiceUnavailable",
};

function errorAnswer(req: IncomingMessage, res: ServerResponse, status: number): void {
  res.writeHead(status, { "content-type": "application/xml" });
  res.end(
    req.method === "HEAD"
      ? undefined
      : `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${CODES[status] ?? "Error"}</Code><Message>injected</Message></Error>`,
  );
}

/** The ETag of `path` on the target (without its query), or undefined when there is no such object. */
function etagAt(to: URL, path: string): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const head = request({ host: to.hostname, port: to.port, method: "HEAD", path: path.split("?")[0] }, (answer) => {
      answer.resume();
      resolve(answer.statusCode === 200 ? String(answer.headers.etag ?? "") : undefined);
    });
    head.on("error", reject);
    head.end();
  });
}

/** Whether an `If-Match` list names this ETag (quoted or not), or is `*`. */
function matches(list: string, etag: string): boolean {
  const bare = (tag: string) => tag.trim().replace(/^W\//, "").replace(/^"|"$/g, "");
  return list.split(",").some((tag) => tag.trim() === "*" || bare(tag) === bare(etag));
}

/** The status a conditional request fails with on the object as it is, or undefined when it may go on. */
async function failedCondition(to: URL, req: IncomingMessage): Promise<number | undefined> {
  const ifMatch = req.headers["if-match"];
  const ifNoneMatch = req.method === "PUT" ? req.headers["if-none-match"] : undefined;
  if (ifMatch === undefined && ifNoneMatch === undefined) return undefined;
  const etag = await etagAt(to, req.url ?? "/");
  if (ifNoneMatch !== undefined && etag !== undefined && (ifNoneMatch.trim() === "*" || matches(ifNoneMatch, etag))) return 412;
  if (ifMatch !== undefined) {
    if (etag === undefined) return 404;
    if (!matches(ifMatch, etag)) return 412;
  }
  return undefined;
}

/** The body of `path` on the target, read past the proxy; undefined when the read fails or stalls. */
function bodyAt(to: URL, path: string): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const get = request({ host: to.hostname, port: to.port, method: "GET", path, timeout: 1_000 }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on("data", (chunk: Buffer) => chunks.push(chunk));
      answer.on("end", () => resolve(answer.statusCode === 200 ? Buffer.concat(chunks) : undefined));
      answer.on("error", () => resolve(undefined));
    });
    get.on("timeout", () => get.destroy());
    get.on("error", () => resolve(undefined));
    get.end();
  });
}

/**
 * Resolves once the target serves the object just written whole (its MD5 is
 * the write's ETag), or after 2 s: s3rver answers a PUT before its file is
 * flushed (its putObject resolves at the body's end, not the file's), and a
 * read right after the answer could get part of the object. S3 reads its
 * writes.
 */
async function flushed(to: URL, path: string, etag: string): Promise<void> {
  const want = etag.replace(/"/g, "");
  for (const until = Date.now() + 2_000; Date.now() < until; ) {
    const body = await bodyAt(to, path);
    if (body && createHash("md5").update(body).digest("hex") === want) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Forwards a request, applying a rule's delay or cut; a plain PUT is answered once the object reads whole. */
function forward(to: URL, req: IncomingMessage, res: ServerResponse, rule: FaultRule | undefined, done: () => void): void {
  const headers = { ...req.headers };
  delete headers["if-match"];
  if (req.method === "PUT") delete headers["if-none-match"];
  // A client that gives up mid-answer must not hold the key's queue.
  res.on("close", done);
  const out = request({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers }, (answer) => {
    const etag = answer.headers.etag;
    // A whole object (the SDK's PUT carries `?x-id=PutObject`); not a part of a multipart upload, whose ETag is the part's.
    const whole = req.method === "PUT" && !new URL(req.url ?? "/", "http://proxy").searchParams.has("uploadId");
    const replaced = whole && answer.statusCode === 200 && etag;
    if (replaced) void flushed(to, req.url ?? "/", etag).then(() => pass(answer));
    else pass(answer);
  });
  const pass = (answer: IncomingMessage) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    const cut = rule?.cutAfterBytes;
    if (cut === undefined) {
      answer.pipe(res);
      answer.on("end", done);
      return;
    }
    let passed = 0;
    answer.on("data", (chunk: Buffer) => {
      if (passed >= cut) return;
      const part = chunk.subarray(0, cut - passed);
      passed += part.length;
      res.write(part);
      if (passed < cut) return;
      answer.pause();
      void (rule?.atCut?.() ?? Promise.resolve()).finally(() => {
        answer.destroy();
        req.socket.destroy();
        done();
      });
    });
    answer.on("end", done);
  };
  out.on("error", () => {
    req.socket.destroy();
    done();
  });
  // A client killed mid-request must not leave its half-sent request open on the server behind.
  res.on("close", () => {
    if (!res.writableFinished) out.destroy();
  });
  req.pipe(out);
}

/**
 * One writer or any number of readers per key at a time, first come first
 * served: S3 replaces an object atomically, s3rver rewrites its files in
 * place, and a read that overlaps a write there gets a 500, a cut body or a
 * body that stalls for the server's keep-alive timeout (measured: 6 s).
 * Writes and conditional requests (their check and their forward as one)
 * are exclusive; plain reads share.
 */
class KeyGate {
  private readonly keys = new Map<string, { readers: number; writer: boolean; waiting: { exclusive: boolean; go: () => void }[] }>();

  /** Calls `work` with its turn's release (idempotent: a forward may end by several paths) once the key allows it. */
  enter(key: string, exclusive: boolean, work: (done: () => void) => void): void {
    const state = this.keys.get(key) ?? { readers: 0, writer: false, waiting: [] };
    this.keys.set(key, state);
    state.waiting.push({
      exclusive,
      go: () => {
        let released = false;
        work(() => {
          if (released) return;
          released = true;
          if (exclusive) state.writer = false;
          else state.readers--;
          this.pump(key);
        });
      },
    });
    this.pump(key);
  }

  private pump(key: string): void {
    const state = this.keys.get(key);
    if (!state) return;
    for (let next = state.waiting[0]; next; next = state.waiting[0]) {
      if (state.writer || (next.exclusive && state.readers > 0)) return;
      state.waiting.shift();
      if (next.exclusive) state.writer = true;
      else state.readers++;
      next.go();
    }
    if (!state.writer && state.readers === 0) this.keys.delete(key);
  }
}

/** Starts the proxy on a free loopback port, forwarding to `target` (`http://127.0.0.1:<port>`). */
export async function startS3Proxy(target: string): Promise<S3Proxy> {
  const to = new URL(target);
  let rules: FaultRule[] = [];
  let conditional = true;
  const counts = { seen: 0, faulted: 0, preconditionFailed: 0 };
  const gate = new KeyGate();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    counts.seen++;
    const rule = rules.find(
      (r) => (!r.method || r.method === req.method) && (!r.path || r.path.test(req.url ?? "")) && (!r.when || r.when(req)) && (r.times ?? 1) > 0,
    );
    if (rule?.times !== undefined) rule.times--;
    if (rule) counts.faulted++;
    if (rule && (rule.reset || rule.status !== undefined)) {
      req.resume();
      if (rule.status === undefined) return void req.socket.destroy();
      return errorAnswer(req, res, rule.status);
    }
    const key = (req.url ?? "/").split("?")[0] ?? "/";
    const conditions = conditional && (req.headers["if-match"] !== undefined || (req.method === "PUT" && req.headers["if-none-match"] !== undefined));
    const go = (done: () => void) =>
      setTimeout(async () => {
        // A client that gave up while it waited (its delay, its turn): nothing to forward, and its turn passes on.
        if (res.destroyed) {
          req.resume();
          return done();
        }
        const failed = conditions ? await failedCondition(to, req).catch(() => 502) : undefined;
        if (failed !== undefined) {
          if (failed === 412) counts.preconditionFailed++;
          req.resume();
          errorAnswer(req, res, failed);
          return done();
        }
        forward(to, req, res, rule, done);
      }, rule?.delayMs ?? 0);
    gate.enter(key, conditions || (req.method !== "GET" && req.method !== "HEAD"), go);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    faults: (next) => {
      rules = next;
    },
    conditional: (on) => {
      conditional = on;
    },
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A real S3-compatible server (s3rver) holding `buckets`, the proxy in front of it, and a client that reaches the server directly. */
export interface S3Store {
  server: S3rver;
  proxy: S3Proxy;
  /** Talks to the server itself, past the proxy (and its faults): the test's own reads and writes while no run is at the same key. */
  client: S3Client;
  /** Talks through the proxy, its faults included: a writer beside a run (another host's lock) whose writes the run's reads see whole. */
  proxied: S3Client;
  /** What a run's environment needs to reach the store through the proxy. */
  env: { AWS_ENDPOINT_URL_S3: string; AWS_ACCESS_KEY_ID: string; AWS_SECRET_ACCESS_KEY: string; AWS_REGION: string };
  close(): Promise<void>;
}

/** Starts s3rver on a free port with its data under `directory`, and the proxy in front of it. */
export async function startS3Store(directory: string, buckets: string[]): Promise<S3Store> {
  const server = new S3rver({
    port: 0,
    address: "127.0.0.1",
    silent: true,
    directory,
    configureBuckets: buckets.map((name) => ({ name, configs: [] })),
  });
  const address = await server.run();
  const endpoint = `http://127.0.0.1:${address.port}`;
  const proxy = await startS3Proxy(endpoint);
  const credentials = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" };
  const client = new S3Client({ endpoint, forcePathStyle: true, region: "us-east-1", credentials });
  const proxied = new S3Client({ endpoint: proxy.url, forcePathStyle: true, region: "us-east-1", credentials });
  return {
    server,
    proxy,
    client,
    proxied,
    env: {
      AWS_ENDPOINT_URL_S3: proxy.url,
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      AWS_REGION: "us-east-1",
    },
    close: async () => {
      client.destroy();
      proxied.destroy();
      await proxy.close();
      // A killed run can leave a request half sent through the proxy; s3rver's close would wait for it for ever.
      (server as unknown as { httpServer?: import("node:http").Server }).httpServer?.closeAllConnections();
      await server.close();
    },
  };
}

/**
 * Plays another run's lock holder: `write` (its heartbeat) again `everyMs`
 * after the last one ended, as a holder renews; a failed write is retried on
 * the next beat. `stop` resolves once the write under way has ended.
 */
export function keepWriting(write: () => Promise<void>, everyMs: number): { stop: () => Promise<void> } {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await write().catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}
