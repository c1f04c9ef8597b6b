/**
 * Keys that live and die: revoke, rotate with a grace, list; a running server
 * follows the accounts file (polling it, or at once on SIGHUP) over real HTTP
 * and keep-alive connections, keeps its last good set through a torn write,
 * and the `keys` commands replace the file atomically with its permissions.
 */
import { spawn } from "node:child_process";
import { chmodSync, closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { Agent, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ModelSet } from "../../src/evaluator/evaluator.js";
import type { ModelRouter } from "../../src/evaluator/router.js";
import { createKey, hashKey } from "../../src/server/accounts.js";
import { ReloadingAccounts } from "../../src/server/accounts-reload.js";
import { buildServer, SERVER_DEFAULTS } from "../../src/server/app.js";
import { BIN, runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";
import { call, memoryLogger, type Transport, testRouter } from "./helpers.js";

let router: ModelRouter;
beforeAll(async () => {
  ({ router } = await testRouter(1));
}, 60_000);
afterAll(async () => {
  await router?.close();
});

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const ask = { state: "My parcel is late.", model: "tiny", questions: { late: { type: "noul" } } };

/** A fresh accounts file with two accounts of one key each, made by the real command path. */
function accountsFile(): { file: string; dir: string; acme: string; ops: string } {
  const dir = mkdtempSync(join(tmpdir(), "te-keys-"));
  const file = join(dir, "accounts.json");
  return { file, dir, acme: createKey(file, "acme", undefined), ops: createKey(file, "ops", undefined) };
}

const idOf = (key: string) => hashKey(key).slice(0, 12);

async function serve(file: string, options: { pollMs?: number; now?: () => number; evaluator?: ModelSet } = {}) {
  const logs = memoryLogger();
  const accounts = new ReloadingAccounts(file, { logger: logs.logger, ...(options.now ? { now: options.now } : {}) });
  accounts.watch(options.pollMs ?? SERVER_DEFAULTS.accountsPollMs);
  const app = buildServer({ evaluator: options.evaluator ?? router, accounts, logger: logs.logger });
  await app.listen({ host: "127.0.0.1", port: 0 });
  cleanups.push(async () => {
    accounts.close();
    await app.close();
  });
  return { app, accounts, logs };
}

/** One keep-alive connection (an agent with one socket): each answer says which local port it came over. */
function connection(app: FastifyInstance) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  cleanups.push(() => agent.destroy());
  const { port } = app.server.address() as AddressInfo;
  return (method: string, path: string, key: string, body?: unknown) =>
    new Promise<{ status: number; json: { detail?: unknown; type?: string }; localPort: number; reused: boolean }>((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const headers = { authorization: `Bearer ${key}`, ...(payload ? { "content-type": "application/json" } : {}) };
      const req = httpRequest({ host: "127.0.0.1", port, method, path, agent, headers }, (res) => {
        let text = "";
        res.on("data", (d: Buffer) => (text += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text), localPort: res.socket?.localPort ?? -1, reused: req.reusedSocket }));
      });
      req.on("error", reject);
      req.end(payload);
    });
}

/** Polls `probe` until it gives `status`; the milliseconds that took. */
async function msUntil(status: number, probe: () => Promise<{ status: number }>, limitMs = 5000): Promise<number> {
  const start = performance.now();
  for (;;) {
    if ((await probe()).status === status) return performance.now() - start;
    if (performance.now() - start > limitMs) throw new Error(`no ${status} within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The router, with evaluations held until `release()` (the real evaluation then runs). */
function held(inner: ModelRouter): { evaluator: ModelSet; release: () => void; waiting: () => number } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let waiting = 0;
  const evaluator = new Proxy(inner, {
    get(target, property) {
      if (property === "evaluate") {
        return async (...args: Parameters<ModelRouter["evaluate"]>) => {
          waiting++;
          await gate;
          return target.evaluate(...args);
        };
      }
      const value = Reflect.get(target, property) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { evaluator, release: () => open(), waiting: () => waiting };
}

describe("a revoked key over real HTTP", () => {
  it("finishes the requests in flight, then gets 401 within the reload window, on an open keep-alive connection too", async () => {
    const { file, acme, ops } = accountsFile();
    const hold = held(router);
    const { app, logs } = await serve(file, { evaluator: hold.evaluator });
    const [busy, idle] = [connection(app), connection(app)];
    // The idle connection is open and has been used before the revoke.
    const before = await idle("GET", "/v1/models", acme);
    expect(before.status).toBe(200);
    const inFlight = [busy("POST", "/v1/systemone", acme, ask), connection(app)("POST", "/v1/systemone", acme, ask)];
    while (hold.waiting() < 2) await new Promise((r) => setTimeout(r, 10));

    const revoked = await runInProcess(["keys", "revoke", idOf(acme), "--accounts-file", file]);
    expect(revoked.code).toBe(0);
    expect(revoked.stderr).toContain(`Revoked key ${idOf(acme)} of account acme`);
    const window = await msUntil(401, () => idle("GET", "/v1/models", acme));
    expect(window).toBeLessThan(2 * SERVER_DEFAULTS.accountsPollMs);
    const refused = await idle("GET", "/v1/models", acme);
    expect(refused).toMatchObject({ status: 401, localPort: before.localPort, reused: true, json: { type: "authentication_error" } });
    expect(refused.json.detail).toBe(`API key ${idOf(acme)} was revoked; ask for a new key`);

    // Admitted before the revoke: they finish with answers, and their connection then refuses the key.
    hold.release();
    const answered = await Promise.all(inFlight);
    expect(answered.map((r) => r.status)).toEqual([200, 200]);
    const next = await busy("POST", "/v1/systemone", acme, ask);
    expect(next).toMatchObject({ status: 401, localPort: answered[0]?.localPort, reused: true });
    // Another account's key is untouched by the swap.
    expect((await idle("POST", "/v1/systemone", ops, ask)).status).toBe(200);
    const reloads = logs.lines.filter((l) => l["msg"] === "accounts reloaded: 2 accounts, 1 live keys");
    expect(reloads).toHaveLength(1);
    // The refusals are logged with the account and key id, never the key.
    const line = logs.lines.find((l) => l["status"] === 401);
    expect(line).toMatchObject({ account: "acme", keyId: idOf(acme) });
    expect(JSON.stringify(logs.lines)).not.toContain(acme);
  }, 30_000);
});

describe("a torn write of the accounts file", () => {
  it("keeps the last good set with one warning per bad state, and recovers when the file is whole again", async () => {
    const { file, acme, ops } = accountsFile();
    const { app, accounts, logs } = await serve(file, { pollMs: 50 });
    const ask = connection(app);
    const good = readFileSync(file, "utf8");
    // What the file will hold: acme's account gone.
    const next = JSON.parse(good) as { accounts: { name: string }[] };
    next.accounts = next.accounts.filter((a) => a.name !== "acme");
    const text = `${JSON.stringify(next, null, 2)}\n`;

    const warnings = () => logs.lines.filter((l) => l["level"] === 40);
    // An in-place write torn halfway (truncated, then half the bytes), left for several polls.
    writeFileSync(file, text.slice(0, text.length >> 1));
    while (warnings().length === 0) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 300));
    expect((await ask("GET", "/v1/models", acme)).status).toBe(200);
    expect(warnings()).toHaveLength(1);
    const warning = warnings()[0] as Record<string, unknown>;
    expect(warning["msg"]).toMatch(/^accounts file not reloaded, keeping the last good set \(2 accounts\): cannot read accounts file .*: /);
    expect(JSON.stringify(warning)).not.toContain("stack");
    // Truncated to nothing: another bad state, another line; the old set still answers.
    writeFileSync(file, "");
    while (warnings().length === 1) await new Promise((r) => setTimeout(r, 20));
    expect((await ask("GET", "/v1/models", acme)).status).toBe(200);

    // Gone altogether (deleted by hand): the same; a SIGHUP on a bad file always gets its line.
    rmSync(file);
    while (warnings().length === 2) await new Promise((r) => setTimeout(r, 20));
    expect(accounts.reload("SIGHUP")).toBe(false);
    expect(warnings().map((w) => w["reason"])).toEqual(["changed", "changed", "changed", "SIGHUP"]);
    expect((await ask("GET", "/v1/models", acme)).status).toBe(200);

    writeFileSync(file, text);
    expect(await msUntil(401, () => ask("GET", "/v1/models", acme))).toBeLessThan(2000);
    expect((await ask("GET", "/v1/models", ops)).status).toBe(200);
    expect(warnings()).toHaveLength(4);
    expect(logs.lines.some((l) => l["msg"] === "accounts reloaded: 1 accounts, 1 live keys")).toBe(true);
  }, 30_000);

  it("a server does not start on a file that does not load", () => {
    const dir = mkdtempSync(join(tmpdir(), "te-keys-"));
    const file = join(dir, "accounts.json");
    writeFileSync(file, '{"accounts": [');
    expect(() => new ReloadingAccounts(file, { logger: memoryLogger().logger })).toThrow(/^cannot read accounts file .*accounts\.json: /);
  });
});

describe.each<Transport>(["inject", "http"])("a rotation's grace over %s", (transport) => {
  it("the new key works at once, the old one until the grace ends, then 401 naming when it expired", async () => {
    const { file, acme } = accountsFile();
    let offset = 0;
    // The rotation is stamped with the real clock; the server's clock is moved past the grace.
    const { app, accounts } = await serve(file, { pollMs: 0, now: () => Date.now() + offset });
    const rotated = await runInProcess(["keys", "rotate", "--account", "acme", "--grace", "1h", "--accounts-file", file]);
    expect(rotated.code).toBe(0);
    const fresh = rotated.stdout.trim();
    expect(fresh).toMatch(/^te_[A-Za-z0-9_-]{32}$/);
    expect(rotated.stderr).toMatch(new RegExp(`The old key ${idOf(acme)} keeps working until \\S+Z \\(1 hour\\)`));
    expect(accounts.reload("test")).toBe(true);

    const status = async (key: string) => (await call(app, transport, "POST", "/v1/systemone", { key, body: ask })).status;
    expect(await status(fresh)).toBe(200);
    expect(await status(acme)).toBe(200);
    offset = 59 * 60_000;
    expect(await status(acme)).toBe(200);
    offset = 60 * 60_000 + 1000;
    const expired = await call(app, transport, "GET", "/v1/models", { key: acme });
    expect(expired.status).toBe(401);
    expect(expired.json).toMatchObject({ type: "authentication_error", detail: expect.stringMatching(/expired at \S+Z \(it was rotated\)/) });
    expect(await status(fresh)).toBe(200);
  });
});

describe("typed-eval keys list, rotate and revoke", () => {
  it("list shows ids, creation and state, never a key or its hash; --json one object per key", async () => {
    const { file, acme, ops } = accountsFile();
    await runInProcess(["keys", "rotate", "--account", "ops", "--grace", "2h", "--accounts-file", file]);
    await runInProcess(["keys", "revoke", acme, "--accounts-file", file]);
    const table = await runInProcess(["keys", "list", "--accounts-file", file]);
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ACCOUNT\s+KEY ID\s+CREATED\s+STATE\s+MODELS$/);
    expect(lines).toHaveLength(4);
    expect(lines[1]).toMatch(new RegExp(`^acme\\s+${idOf(acme)}\\s+\\S+Z\\s+revoked \\S+Z\\s+\\*$`));
    expect(lines[2]).toMatch(new RegExp(`^ops\\s+${idOf(ops)}\\s+\\S+Z\\s+expires \\S+Z \\(in (2 hours|1\\.\\d hours)\\)\\s+\\*$`));
    expect(lines[3]).toMatch(/^ops\s+[0-9a-f]{12}\s+\S+Z\s+active\s+\*$/);
    const json = await runInProcess(["keys", "list", "--json", "--accounts-file", file]);
    const rows = json.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows.map((r) => r["state"])).toEqual(["revoked", "expiring", "active"]);
    for (const out of [table.stdout, json.stdout]) {
      for (const secret of [acme, ops, hashKey(acme), hashKey(ops)]) expect(out).not.toContain(secret);
    }
  });

  it("rotate names the key when an account has several, and refuses an account with none", async () => {
    const { file } = accountsFile();
    await runInProcess(["keys", "create", "--account", "acme", "--accounts-file", file]);
    const many = await runInProcess(["keys", "rotate", "--account", "acme", "--grace", "0", "--accounts-file", file]);
    expect(many.code).toBe(2);
    expect(many.stderr).toMatch(
      /^typed-eval: account acme has 2 live keys without an end \(live: [0-9a-f]{12}, [0-9a-f]{12}\); name the one to rotate with --key ID\n$/,
    );
    expect((await runInProcess(["keys", "rotate", "--account", "nobody", "--grace", "1h", "--accounts-file", file])).stderr).toMatch(/no account nobody/);
    const bad = await runInProcess(["keys", "rotate", "--account", "acme", "--grace", "soon", "--accounts-file", file]);
    expect(bad.stderr).toMatch(/^typed-eval: --grace takes a duration, such as 500ms, 30s, 2m or 1h/);
    const missing = await runInProcess(["keys", "rotate", "--account", "acme", "--accounts-file", file]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/grace/);
  });

  it("revoke takes an id or the key itself, says when a key already was, and refuses an unknown one", async () => {
    const { file, acme, ops } = accountsFile();
    const byKey = await runInProcess(["keys", "revoke", ops, "--accounts-file", file]);
    expect(byKey).toMatchObject({ code: 0, stdout: "" });
    expect(byKey.stderr).toContain(`Revoked key ${idOf(ops)} of account ops`);
    expect((await runInProcess(["keys", "revoke", idOf(ops), "--accounts-file", file])).stderr).toBe(`key ${idOf(ops)} of account ops was already revoked.\n`);
    const unknown = await runInProcess(["keys", "revoke", "0123456789ab", "--accounts-file", file]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^typed-eval: no key 0123456789ab in .*; `typed-eval keys list` shows the ids\n$/);
    const none = await runInProcess(["keys", "revoke", idOf(acme), "--accounts-file", join(tmpdir(), "te-no-such-accounts.json")]);
    expect(none.stderr).toMatch(/^typed-eval: no accounts file at .*; make one with: typed-eval keys create/);
  });

  it("each change replaces the file whole, keeping its mode, leaving no temporary or lock file; an older file keeps loading", async () => {
    const { file, dir, acme } = accountsFile();
    chmodSync(file, 0o640);
    // A file from before keys could end: no expires, no revoked; it loads and lists as it was.
    const old = { accounts: [{ name: "legacy", models: ["*"], keys: [{ id: idOf(acme), sha256: hashKey(acme), created: "2026-11-21T00:00:00Z" }] }] };
    writeFileSync(file, JSON.stringify(old));
    expect((await runInProcess(["keys", "list", "--json", "--accounts-file", file])).stdout).toBe(
      `${JSON.stringify({ account: "legacy", models: ["*"], id: idOf(acme), created: "2026-11-21T00:00:00Z", state: "active" })}\n`,
    );
    // A reader holding the old file open keeps reading it whole: the new one was renamed over it, not written into it.
    const reader = openSync(file, "r");
    await runInProcess(["keys", "rotate", "--account", "legacy", "--grace", "30m", "--accounts-file", file]);
    await runInProcess(["keys", "revoke", idOf(acme), "--accounts-file", file]);
    expect(readFileSync(reader, "utf8")).toBe(JSON.stringify(old));
    closeSync(reader);
    expect(statSync(file).mode & 0o777).toBe(0o640);
    expect(readdirSync(dir)).toEqual(["accounts.json"]);
    const stored = JSON.parse(readFileSync(file, "utf8")) as typeof old & { accounts: { keys: { revoked?: string; expires?: string }[] }[] };
    expect(stored.accounts[0]?.keys[0]).toMatchObject({ revoked: expect.any(String), expires: expect.any(String) });
  });
});

describe("serve and SIGHUP", () => {
  it("reloads the accounts file at once on SIGHUP (with polling off), and keeps serving", async () => {
    const { file, acme } = accountsFile();
    const server = spawn(
      process.execPath,
      [BIN, "serve", "--accounts-file", file, "--model-path", generatedModel(TINY), "--port", "0", "--accounts-reload", "0"],
      {
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    const exited = new Promise<number | null>((resolve) => server.on("exit", (code) => resolve(code)));
    cleanups.push(async () => {
      server.kill("SIGTERM");
      await exited;
    });
    let log = "";
    server.stderr.on("data", (d: Buffer) => (log += d.toString()));
    while (!/"url":"http/.test(log)) {
      if (server.exitCode !== null) throw new Error(log);
      await new Promise((r) => setTimeout(r, 20));
    }
    const url = /"url":"(http:\/\/[^"]+)"/.exec(log)?.[1] as string;
    const models = () => fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${acme}` } });
    expect((await models()).status).toBe(200);
    expect((await runInProcess(["keys", "revoke", idOf(acme), "--accounts-file", file])).code).toBe(0);
    // No polling: the revoked key still works until the signal.
    await new Promise((r) => setTimeout(r, 300));
    expect((await models()).status).toBe(200);
    server.kill("SIGHUP");
    expect(await msUntil(401, models, 2000)).toBeLessThan(1000);
    expect(log).toContain('"reason":"SIGHUP"');
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  }, 30_000);
});
