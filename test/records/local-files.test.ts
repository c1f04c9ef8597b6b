/**
 * The one check that a local file can be written and the one atomic replace
 * (src/records/local-files.ts), which every command, the run and the
 * accounts file use: their refusals, and what a replace keeps and leaves.
 */
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { InvocationError } from "../../src/api/errors.js";
import { checkWritableFile, replaceFile, writeWholeFile } from "../../src/records/local-files.js";

const fresh = () => mkdtempSync(join(tmpdir(), "te-local-files-"));

describe("checkWritableFile", () => {
  it("makes the folder, and leaves nothing behind", () => {
    const dir = fresh();
    checkWritableFile(join(dir, "a", "b", "out.jsonl"), "--output");
    expect(readdirSync(join(dir, "a", "b"))).toEqual([]);
  });

  it.each([
    [
      "a directory in the file's place",
      (dir: string) => (mkdirSync(join(dir, "out.jsonl")), join(dir, "out.jsonl")),
      /: it is a directory, not a file; choose another path$/,
    ],
    [
      "a directory where its .partial goes",
      (dir: string) => (mkdirSync(join(dir, "out.jsonl.partial")), join(dir, "out.jsonl")),
      /: .*out\.jsonl\.partial is a directory, and the file is written there first; choose another path$/,
    ],
    [
      "a path through a file",
      (dir: string) => (writeFileSync(join(dir, "f"), ""), join(dir, "f", "out.jsonl")),
      /: part of .*f is a file, not a folder; choose another path$/,
    ],
  ])("refuses %s in one line naming the flag", (_what, place, said) => {
    const path = place(fresh());
    let error: unknown;
    try {
      checkWritableFile(path, "--errors");
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvocationError);
    expect((error as Error).message).toMatch(new RegExp(`^cannot write --errors ${path.replaceAll(".", "\\.")}`));
    expect((error as Error).message).toMatch(said);
  });
});

describe("replaceFile", () => {
  it("replaces a file whole, keeping its mode; a new file gets the mode asked for whatever the umask; no temporary file is left", () => {
    const dir = fresh();
    const old = join(dir, "kept.json");
    writeFileSync(old, "old");
    chmodSync(old, 0o640);
    replaceFile(old, "new");
    expect(readFileSync(old, "utf8")).toBe("new");
    expect(statSync(old).mode & 0o777).toBe(0o640);
    const mask = process.umask(0o077);
    try {
      replaceFile(join(dir, "open.json"), "x", { mode: 0o644 });
    } finally {
      process.umask(mask);
    }
    expect(statSync(join(dir, "open.json")).mode & 0o777).toBe(0o644);
    replaceFile(join(dir, "bytes.bin"), new Uint8Array([1, 2, 3]));
    expect([...readFileSync(join(dir, "bytes.bin"))]).toEqual([1, 2, 3]);
    expect(readdirSync(dir).sort()).toEqual(["bytes.bin", "kept.json", "open.json"]);
  });

  it("follows a symbolic link: the link stays, the file it names is replaced", () => {
    const dir = fresh();
    writeFileSync(join(dir, "real.json"), "old");
    symlinkSync("real.json", join(dir, "link.json"));
    replaceFile(join(dir, "link.json"), "new");
    expect(lstatSync(join(dir, "link.json")).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(dir, "link.json"))).toBe("real.json");
    expect(readFileSync(join(dir, "real.json"), "utf8")).toBe("new");
  });

  it("writes every byte of a large file (a single write may take less than it is given)", () => {
    const dir = fresh();
    const big = "y".repeat(8 * 1024 * 1024 + 13);
    replaceFile(join(dir, "big.txt"), big);
    expect(statSync(join(dir, "big.txt")).size).toBe(big.length);
  });
});

describe("writeWholeFile", () => {
  it("a file it cannot replace is one line naming the flag, the old file untouched and no temporary file left", () => {
    const dir = fresh();
    const target = join(dir, "report.html");
    mkdirSync(target);
    expect(() => writeWholeFile(target, "<html>", "--html")).toThrow(
      /^cannot write --html .*report\.html: it is a directory, not a file; choose another path$/,
    );
    expect(readdirSync(dir)).toEqual(["report.html"]);
    const file = join(dir, "ok.html");
    writeWholeFile(file, "<html>", "--html");
    expect(readFileSync(file, "utf8")).toBe("<html>");
  });
});
