import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DownloadError, DownloadUnavailableError, downloadUrl, pullModel } from "../../src/models/download.js";
import type { ModelEntry } from "../../src/models/registry.js";

const payload = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7919) % 256));
const sha = createHash("sha256").update(payload).digest("hex");
let server: Server;
let base: string;
const ranges: (string | undefined)[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    ranges.push(req.headers.range);
    if (req.url?.endsWith("/missing.gguf")) {
      res.writeHead(404).end("no");
      return;
    }
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
    const start = range ? Number(range[1]) : 0;
    res.writeHead(range ? 206 : 200, { "content-length": String(payload.length - start) });
    res.end(payload.subarray(start));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

function entry(file: string, sha256 = sha): ModelEntry {
  return {
    name: "m",
    aliases: [],
    version: "1.0.0",
    description: "",
    release_date: "2026-01-01",
    engine: "llama",
    source: { uri: `${base}/${file}`, sha256 },
    context_size: 512,
    temperature: 1,
    price_per_million_input_tokens: 0,
  };
}

describe("pullModel", () => {
  it("maps hf:// URIs to the resolve URL, honouring HF_ENDPOINT", () => {
    expect(downloadUrl("hf://Qwen/Repo-GGUF/file.gguf")).toBe("https://huggingface.co/Qwen/Repo-GGUF/resolve/main/file.gguf");
    process.env["HF_ENDPOINT"] = "http://mirror.local/";
    expect(downloadUrl("hf://a/b/c/d.gguf")).toBe("http://mirror.local/a/b/resolve/main/c/d.gguf");
    delete process.env["HF_ENDPOINT"];
  });

  it("downloads, reports progress, verifies the SHA-256 and puts the file in place", async () => {
    const dest = join(mkdtempSync(join(tmpdir(), "te-dl-")), "model.gguf");
    const seen: number[] = [];
    expect(await pullModel(entry("model.gguf"), dest, { onProgress: (done) => seen.push(done) })).toBe(true);
    expect(readFileSync(dest).equals(payload)).toBe(true);
    expect(seen.at(-1)).toBe(payload.length);
    expect(existsSync(`${dest}.partial`)).toBe(false);
    expect(await pullModel(entry("model.gguf"), dest)).toBe(false);
  });

  it("resumes an interrupted download with a Range request", async () => {
    const dest = join(mkdtempSync(join(tmpdir(), "te-dl-")), "model.gguf");
    writeFileSync(`${dest}.partial`, payload.subarray(0, 123_456));
    ranges.length = 0;
    await pullModel(entry("model.gguf"), dest);
    expect(ranges).toEqual(["bytes=123456-"]);
    expect(readFileSync(dest).equals(payload)).toBe(true);
  });

  it("refuses a file whose checksum differs, deleting it and saying what to do", async () => {
    const dest = join(mkdtempSync(join(tmpdir(), "te-dl-")), "model.gguf");
    await expect(pullModel(entry("model.gguf", "0".repeat(64)), dest)).rejects.toThrow(
      /checksum mismatch.*expected 0{64}, got [0-9a-f]{64}.*run the pull again/,
    );
    expect(existsSync(dest)).toBe(false);
    expect(existsSync(`${dest}.partial`)).toBe(false);
  });

  it("reports HTTP errors and unreachable hosts clearly", async () => {
    const dest = join(mkdtempSync(join(tmpdir(), "te-dl-")), "x.gguf");
    await expect(pullModel(entry("missing.gguf"), dest)).rejects.toThrow(/HTTP 404/);
    const offline = { ...entry("x.gguf"), source: { uri: "http://127.0.0.1:9/x.gguf", sha256: sha } };
    await expect(pullModel(offline, dest)).rejects.toThrow(/cannot reach .*--model-path/);
    // A host that does not answer is not the invocation's fault: the resumable error, not a DownloadError (exit 2).
    await expect(pullModel(offline, dest)).rejects.toBeInstanceOf(DownloadUnavailableError);
    await expect(pullModel(entry("missing.gguf"), dest)).rejects.toBeInstanceOf(DownloadError);
  });
});
