/** The byte-level pieces of the JSONL reader: line splitting over any chunking, and where UTF-8 breaks. */
import { isUtf8 } from "node:buffer";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { byteLines, firstInvalidUtf8 } from "../../src/records/text.js";

async function collect(chunks: Buffer[], max?: number) {
  const out: (string | number)[] = [];
  for await (const line of byteLines(
    (async function* () {
      yield* chunks;
    })(),
    max,
  )) {
    out.push("bytes" in line ? line.bytes.toString("latin1") : line.tooLong);
  }
  return out;
}

/** Cuts a buffer at the given offsets. */
const cut = (whole: Buffer, offsets: number[]) => {
  const points = [...new Set(offsets.map((o) => o % (whole.length + 1)))].sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let from = 0;
  for (const p of [...points, whole.length]) {
    pieces.push(whole.subarray(from, p));
    from = p;
  }
  return pieces;
};

describe("byteLines", () => {
  it("gives the same lines as splitting the whole text, however the stream is chunked", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.string({ unit: fc.constantFrom("a", "b", "\n", "\r", "é") }), { maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        async (parts, offsets) => {
          const whole = Buffer.from(parts.join(""), "latin1");
          const expected = whole.toString("latin1").split("\n");
          if (expected.at(-1) === "") expected.pop(); // a final newline ends the last line; it does not start another
          expect(await collect(cut(whole, offsets))).toEqual(expected);
        },
      ),
    );
  });

  it("drops a line longer than the bound as it streams, reports its length, and goes on", async () => {
    const lines = await collect([Buffer.from("ok\nxxxx"), Buffer.from("xxxx"), Buffer.from("xx\nnext\n")], 5);
    expect(lines).toEqual(["ok", 10, "next"]);
    expect(await collect([Buffer.from("abcde\nabcdef")], 5)).toEqual(["abcde", 6]);
  });
});

describe("firstInvalidUtf8", () => {
  it("is the length exactly for valid UTF-8, and otherwise the end of the longest valid prefix", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 24 }), fc.string({ unit: "binary", maxLength: 8 }), (noise, text) => {
        const bytes = Buffer.concat([Buffer.from(text, "utf8"), Buffer.from(noise)]);
        const at = firstInvalidUtf8(bytes);
        expect(at === bytes.length).toBe(isUtf8(bytes));
        expect(isUtf8(bytes.subarray(0, at))).toBe(true);
        // The text part is valid (Buffer.from encodes lone surrogates as U+FFFD): the break is never inside it.
        expect(at).toBeGreaterThanOrEqual(Buffer.byteLength(text, "utf8"));
      }),
    );
  });

  it("points at the first byte of a lone surrogate, an overlong form, a cut character", () => {
    expect(firstInvalidUtf8(Buffer.from([0x61, 0xed, 0xa0, 0x80]))).toBe(1);
    expect(firstInvalidUtf8(Buffer.from([0x61, 0x62, 0xc0, 0xaf]))).toBe(2);
    expect(firstInvalidUtf8(Buffer.from([0x61, 0xe2, 0x82]))).toBe(1);
  });
});

describe("CSV record lines", () => {
  async function lines(text: string): Promise<[number, string][]> {
    const { Readable } = await import("node:stream");
    const { itemsOf } = await import("../../src/records/sources.js");
    const { CSV } = await import("../../src/records/csv.js");
    const out: [number, string][] = [];
    for await (const item of itemsOf(Readable.from([Buffer.from(text)]), CSV, "t.csv"))
      out.push([item.line, "record" in item ? JSON.stringify(item.record) : item.error]);
    return out;
  }

  it("name the line a record starts on, with quoted newlines and empty lines before it", async () => {
    expect((await lines('a,b\n1,2\n\n3,"x\ny\nz"\n4,5\n')).map(([l]) => l)).toEqual([2, 4, 7]);
  });

  it("count a CRLF inside quotes as one line, for this record and the ones after it", async () => {
    expect((await lines('a,b\r\n1,2\r\n3,"x\r\ny"\r\n4,5\r\n')).map(([l]) => l)).toEqual([2, 3, 5]);
  });
});
