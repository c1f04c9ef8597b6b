/**
 * The package as users install it: `npm pack`, then `npm install -g` of the
 * tarball into a temporary prefix, then the installed `typed-eval` run from
 * outside the checkout: --help, validate, estimate, ask --model-path, serve.
 * It installs every dependency (node-llama-cpp's prebuilt binaries are
 * hundreds of MB), so it runs in `make soak` (PACKAGE_TEST=1), not `make test`.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { generatedModel, TINY } from "../support/models.js";

const root = resolve(import.meta.dirname, "../..");

describe.skipIf(!process.env["PACKAGE_TEST"])("the packed package", () => {
  it("installs from its tarball and runs from outside the checkout, offline for models", async () => {
    const work = mkdtempSync(join(tmpdir(), "te-package-"));
    const pack = spawnSync("npm", ["pack", "--pack-destination", work], { cwd: root, encoding: "utf8" });
    expect(pack.status, pack.stderr).toBe(0);
    const tarball = join(work, readdirSync(work).find((f) => f.endsWith(".tgz"))!);
    const listing = spawnSync("tar", ["tzf", tarball], { encoding: "utf8" }).stdout;
    expect(listing).toContain("package/dist/cli/main.js");
    expect(listing).not.toMatch(/package\/(src|test|bench)\//);
    const prefix = join(work, "prefix");
    const install = spawnSync("npm", ["install", "-g", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", tarball], {
      encoding: "utf8",
      timeout: 600_000,
    });
    expect(install.status, install.stderr).toBe(0);
    const bin = join(prefix, "bin", "typed-eval");
    const model = generatedModel(TINY);
    const env = { ...process.env, TYPED_EVAL_LOG_LEVEL: "warn", TYPED_EVAL_MODELS_DIR: join(work, "models"), HF_ENDPOINT: "http://127.0.0.1:9" };
    const run = (args: string[], input?: string) => spawnSync(bin, args, { cwd: work, env, encoding: "utf8", input, timeout: 120_000 });
    expect(run(["--help"]).stdout).toContain("typed-eval run <input>");
    const request = join(work, "request.json");
    writeFileSync(request, JSON.stringify({ state: "s", model: "default", questions: { q: { type: "noul" } } }));
    expect(run(["validate", request]).stdout).toMatch(/^valid: 1 question/);
    const job = join(prefix, "lib", "node_modules", "typed-eval", "jobs", "support-triage.json");
    const data = join(prefix, "lib", "node_modules", "typed-eval", "examples", "data", "tickets.jsonl");
    expect(run(["estimate", data, "--job", job, "--model-path", model]).stdout).toMatch(/exact, the model's tokenizer/);
    const asked = run(["ask", "-q", job, "--model-path", model, "--text"], "My parcel is late.");
    expect(asked.status, asked.stderr).toBe(0);
    expect(JSON.parse(asked.stdout)).toMatchObject({ answers: { wants_refund: { type: "noul" } } });
    // serve: starts, answers /healthz, stops on SIGTERM.
    spawnSync(bin, ["keys", "create", "--account", "dev", "--accounts-file", join(work, "accounts.json")], { cwd: work, env });
    const server = spawn(bin, ["serve", "--accounts-file", join(work, "accounts.json"), "--model-path", model, "--port", "0"], {
      cwd: work,
      env: { ...env, TYPED_EVAL_LOG_LEVEL: "info" },
    });
    const url = await new Promise<string>((done, fail) => {
      let text = "";
      server.stderr.on("data", (d: Buffer) => {
        text += d.toString();
        const m = /listening on (http:\/\/[^ "]+)/.exec(text);
        if (m) done(m[1]!);
      });
      server.on("exit", (code) => fail(new Error(`serve exited ${code}: ${text}`)));
    });
    expect((await (await fetch(`${url}/healthz`)).json()) as unknown).toMatchObject({ status: "ok" });
    server.kill("SIGTERM");
    expect(await new Promise((done) => server.on("exit", done))).toBe(0);
  }, 900_000);
});
