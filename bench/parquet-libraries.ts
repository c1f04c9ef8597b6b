/**
 * The Parquet libraries weighed for typed-eval, side by side: one million rows
 * of an id, an 80-character text and a float, written with 100,000-row groups
 * and read back a row group at a time (the whole table for parquet-wasm, which
 * cannot stream from Node). Each library runs in its own process, so its peak
 * RSS is its own.
 *
 * Not part of `make bench`: the alternatives are not dependencies. To rerun:
 *   npm install --no-save @dsnp/parquetjs parquet-wasm apache-arrow
 *   npx tsx bench/parquet-libraries.ts
 * Results: bench/RESULTS.md and the README ("Why hyparquet").
 */
import { spawnSync } from "node:child_process";
import { appendFileSync, mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const N = 1_000_000;
const GROUP = 100_000;
const text = (i: number) => `record ${i}: the quick brown fox jumps over the lazy dog, number ${i % 977}`;

type Step = "write" | "read";
const LIBRARIES = ["hyparquet", "parquetjs", "parquet-wasm"] as const;
type Library = (typeof LIBRARIES)[number];

async function write(library: Library, path: string): Promise<void> {
  if (library === "hyparquet") {
    const { ByteWriter, ParquetWriter } = await import("hyparquet-writer");
    const bytes = new ByteWriter();
    const writer = new ParquetWriter({
      writer: bytes,
      schema: [
        { name: "root", num_children: 3 },
        { name: "id", type: "BYTE_ARRAY", converted_type: "UTF8", repetition_type: "OPTIONAL" },
        { name: "text", type: "BYTE_ARRAY", converted_type: "UTF8", repetition_type: "OPTIONAL" },
        { name: "n", type: "DOUBLE", repetition_type: "OPTIONAL" },
      ],
    });
    writeFileSync(path, "");
    for (let start = 0; start < N; start += GROUP) {
      const ids: string[] = [];
      const texts: string[] = [];
      const ns: number[] = [];
      for (let i = start; i < start + GROUP; i++) {
        ids.push(`r${i}`);
        texts.push(text(i));
        ns.push(i / 3);
      }
      writer.write({
        columnData: [
          { name: "id", data: ids },
          { name: "text", data: texts },
          { name: "n", data: ns },
        ],
        rowGroupSize: GROUP,
      });
      appendFileSync(path, bytes.getBytes());
      bytes.index = 0;
    }
    writer.finish();
    appendFileSync(path, bytes.getBytes());
  } else if (library === "parquetjs") {
    const { ParquetSchema, ParquetWriter } = await import(String("@dsnp/parquetjs"));
    const schema = new ParquetSchema({ id: { type: "UTF8", optional: true }, text: { type: "UTF8", optional: true }, n: { type: "DOUBLE", optional: true } });
    const writer = await ParquetWriter.openFile(schema, path, { rowGroupSize: GROUP, compression: "SNAPPY" });
    for (let i = 0; i < N; i++) await writer.appendRow({ id: `r${i}`, text: text(i), n: i / 3 });
    await writer.close();
  } else {
    const arrow = await import(String("apache-arrow"));
    const wasm = await import(String("parquet-wasm/node"));
    const ids: string[] = [];
    const texts: string[] = [];
    const ns = new Float64Array(N);
    for (let i = 0; i < N; i++) {
      ids.push(`r${i}`);
      texts.push(text(i));
      ns[i] = i / 3;
    }
    const table = wasm.Table.fromIPCStream(arrow.tableToIPC(arrow.tableFromArrays({ id: ids, text: texts, n: ns }), "stream"));
    const props = new wasm.WriterPropertiesBuilder().setCompression(wasm.Compression.SNAPPY).setMaxRowGroupSize(GROUP).build();
    writeFileSync(path, wasm.writeParquet(table, props));
  }
}

async function read(library: Library, path: string): Promise<number> {
  let rows = 0;
  if (library === "hyparquet") {
    const { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } = await import("hyparquet");
    const { compressors } = await import("hyparquet-compressors");
    const file = await asyncBufferFromFile(path);
    const metadata = await parquetMetadataAsync(file);
    let start = 0;
    for (const group of metadata.row_groups) {
      const end = start + Number(group.num_rows);
      rows += (await parquetReadObjects({ file, metadata, rowStart: start, rowEnd: end, compressors })).length;
      start = end;
    }
  } else if (library === "parquetjs") {
    const { ParquetReader } = await import(String("@dsnp/parquetjs"));
    const reader = await ParquetReader.openFile(path);
    const cursor = reader.getCursor();
    while (await cursor.next()) rows++;
    await reader.close();
  } else {
    const arrow = await import(String("apache-arrow"));
    const wasm = await import(String("parquet-wasm/node"));
    const { readFileSync } = await import("node:fs");
    for (const _ of arrow.tableFromIPC(wasm.readParquet(readFileSync(path)).intoIPCStream())) rows++;
  }
  return rows;
}

async function child(library: Library, step: Step, path: string): Promise<void> {
  const started = performance.now();
  if (step === "write") await write(library, path);
  else if ((await read(library, path)) !== N) throw new Error(`${library} read the wrong number of rows`);
  process.stdout.write(JSON.stringify({ seconds: (performance.now() - started) / 1000, rssMiB: process.resourceUsage().maxRSS / 1024 }));
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "te-parquet-libs-"));
  for (const library of LIBRARIES) {
    const path = join(dir, `${library}.parquet`);
    const results: string[] = [];
    for (const step of ["write", "read"] as const) {
      const r = spawnSync(process.execPath, ["--import", "tsx", import.meta.filename, library, step, path], { encoding: "utf8" });
      if (r.status !== 0) {
        results.push(`${step} failed (${r.stderr.split("\n").find((l) => /Error/.test(l)) ?? r.status}; is it installed?)`);
        break;
      }
      const { seconds, rssMiB } = JSON.parse(r.stdout) as { seconds: number; rssMiB: number };
      results.push(`${step} ${seconds.toFixed(2)} s, ${rssMiB.toFixed(0)} MiB peak RSS`);
    }
    let size = "";
    try {
      size = `, file ${(statSync(path).size / 1e6).toFixed(0)} MB`;
    } catch {
      // The write failed: no file.
    }
    process.stdout.write(`${library}: ${results.join("; ")}${size}\n`);
  }
}

const [library, step, path] = process.argv.slice(2);
if (library && step && path) await child(library as Library, step as Step, path);
else await main();
