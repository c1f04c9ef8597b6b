/**
 * Parquet in and out, checked against DuckDB as the independent
 * implementation: it writes the inputs our reader reads (nested types,
 * ZSTD, several row groups), and reads the outputs our writer writes.
 */
import { mkdtempSync, readFileSync, statSync, truncateSync, copyFileSync } from "node:fs";
import { Readable } from "node:stream";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DuckDBInstance, type DuckDBConnection } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logging/logger.js";
import { flatColumns, type OutputRow } from "../../src/runner/output/columns.js";
import { parseJob } from "../../src/records/job.js";
import { RunLimiter } from "../../src/runner/send/limiter.js";
import { localTarget, sinkWriter } from "../../src/runner/output/outputs.js";
import { partialFile } from "../../src/runner/output/targets.js";
import { PARQUET, ParquetEncoder, parquetItems, plainValue } from "../../src/records/parquet.js";
import { JSONL } from "../../src/records/jsonl.js";
import { localRanges } from "../../src/records/ranges.js";
import { runJob } from "../../src/runner/run.js";
import { itemsOf, openLocalSource } from "../../src/records/sources.js";
import { outputFormat } from "../../src/records/formats.js";
import type { SourceItem } from "../../src/records/source.js";
import { readAnswers } from "../../src/quality/answers.js";
import { FakeEvaluator } from "../support/fake-evaluator.js";
import { SourceError } from "../../src/api/verdict.js";

const dir = mkdtempSync(join(tmpdir(), "te-parquet-"));
let duck: DuckDBConnection;

beforeAll(async () => {
  duck = await (await DuckDBInstance.create(":memory:")).connect();
});
afterAll(() => duck?.closeSync());

/** Rows of a DuckDB query as plain JSON-able objects (BIGINT as numbers when safe). */
async function query(sql: string): Promise<Record<string, unknown>[]> {
  const result = await duck.runAndReadAll(sql);
  return result.getRowObjectsJS().map((row) => plainValue(row) as Record<string, unknown>);
}

async function collect(items: AsyncIterable<SourceItem>): Promise<SourceItem[]> {
  const out: SourceItem[] = [];
  for await (const item of items) out.push(item);
  return out;
}

const records = (items: SourceItem[]) => items.map((i) => ("record" in i ? i.record : i.error));

describe("Parquet input", () => {
  it("reads a DuckDB file (ZSTD, three row groups, structs, lists, 64-bit ints, timestamps, nulls) as JSON records, in order", async () => {
    const path = join(dir, "typed.parquet");
    await duck.run(`COPY (
      SELECT i AS n, 'text ' || i AS text, {'tier': CASE WHEN i % 2 = 0 THEN 'gold' END} AS customer, [i, i + 1] AS tags,
             i::BIGINT * 1000000000000 AS big, CASE WHEN i = 7 THEN 9223372036854775807 END AS huge,
             TIMESTAMP '2026-11-01 09:00:00' + INTERVAL (i) MINUTE AS at, i % 3 = 0 AS flag, i / 4 AS ratio
      FROM range(5000) t(i)) TO '${path}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 2048)`);
    expect((await query(`SELECT count(DISTINCT row_group_id) AS g FROM parquet_metadata('${path}')`))[0]).toEqual({ g: 3 });
    const source = openLocalSource(path, PARQUET);
    const items = await collect(source.items);
    expect(items).toHaveLength(5000);
    expect(items.map((i) => i.line)).toEqual(Array.from({ length: 5000 }, (_, i) => i + 1));
    expect(items.map((i) => i.seq)).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    const got = records(items);
    expect(got[0]).toEqual({
      n: 0,
      text: "text 0",
      customer: { tier: "gold" },
      tags: [0, 1],
      big: 0,
      huge: null,
      // DuckDB's TIMESTAMP is naive, in microseconds: no Z, six digits.
      at: "2026-11-01T09:00:00.000000",
      flag: true,
      ratio: 0,
    });
    expect(got[7]).toMatchObject({ customer: { tier: null }, huge: "9223372036854775807", ratio: 1.75, at: "2026-11-01T09:07:00.000000" });
    expect(got[4999]).toMatchObject({ n: 4999, big: 4_999_000_000_000_000, tags: [4999, 5000] });
    // Progress walks the file and ends at its size.
    expect(source.progress()).toEqual({ bytes: statSync(path).size, total: statSync(path).size });
  });

  it("fetches only the columns the job reads, and every column when the job names one the file lacks", async () => {
    const path = join(dir, "wide.parquet");
    await duck.run(`COPY (SELECT 'r' || i AS id, 'short ' || i AS text, repeat(md5(i::VARCHAR), 64) AS padding FROM range(3000) t(i))
      TO '${path}' (FORMAT parquet, COMPRESSION uncompressed)`);
    const size = statSync(path).size;
    const read = async (fields: string[] | undefined) => {
      let fetched = 0;
      const open = async () => {
        const file = await localRanges(path);
        return { ...file, slice: async (start: number, end?: number) => ((fetched += (end ?? size) - start), file.slice(start, end)) };
      };
      const items = await collect(parquetItems(open, path, 0, { bytes: 0 }, fields));
      return { items, fetched };
    };
    const narrow = await read(["text", "id"]);
    expect(records(narrow.items)[5]).toEqual({ id: "r5", text: "short 5" });
    // The footer is read in one go (up to 512 KiB); the 6 MB padding column is never fetched.
    expect(narrow.fetched).toBeLessThan(size / 5);
    const all = await read(["text", "no_such_column"]);
    expect(Object.keys(records(all.items)[0] as object).sort()).toEqual(["id", "padding", "text"]);
    expect(all.fetched).toBeGreaterThan(size * 0.9);
  });

  it("stops with one clear error on a truncated file, on Parquet under another name, and on Parquet from stdin", async () => {
    const path = join(dir, "cut.parquet");
    await duck.run(`COPY (SELECT i FROM range(100) t(i)) TO '${path}' (FORMAT parquet)`);
    const named = join(dir, "really-parquet.jsonl");
    copyFileSync(path, named);
    truncateSync(path, Math.floor(statSync(path).size / 2));
    await expect(collect(openLocalSource(path, PARQUET).items)).rejects.toThrow(SourceError);
    await expect(collect(openLocalSource(path, PARQUET).items)).rejects.toThrow(/cut\.parquet is not a Parquet file that can be read/);
    await expect(collect(openLocalSource(named, JSONL).items)).rejects.toThrow(
      /really-parquet\.jsonl is a Parquet file: name it \.parquet or pass --format parquet/,
    );
    expect(() => openLocalSource("-", PARQUET)).toThrow(/not stdin/);
    // Parquet piped in as JSONL: named as Parquet, with what to do instead.
    await expect(collect(itemsOf(Readable.from([readFileSync(named)]), JSONL, "stdin"))).rejects.toThrow(
      /^stdin is a Parquet file: .*save it as a \.parquet file and pass its path$/,
    );
    // A read that fails (disk, network) is said to be a failed read, not a file that is not Parquet.
    const failing = async () => ({ byteLength: 1000, slice: async () => Promise.reject(new Error("socket hang up")), close: async () => undefined });
    await expect(collect(parquetItems(failing, "s3://b/k.parquet", 0, { bytes: 0 }))).rejects.toThrow(
      /^cannot read s3:\/\/b\/k\.parquet: reading bytes \d+-1000: socket hang up$/,
    );
  });
});

describe("Parquet as other tools write it", () => {
  /** A DuckDB-written input of the types hyparquet's defaults lose, 40 rows (NaN every 7th, Infinity in row 3, nulls every 11th). */
  async function typedInput(): Promise<string> {
    const path = join(dir, "typed-kinds.parquet");
    await duck.run(`COPY (
      SELECT 'r' || i AS id, 'ticket ' || i AS text,
        TIMESTAMP '2026-11-01 09:00:00.123456' + INTERVAL (i) SECOND AS ts,
        epoch_ms(1793523600123 + i * 1000)::TIMESTAMP_MS AS tms,
        make_timestamp_ns(1793523600123456789 + i * 1000000000) AS tns,
        TIMESTAMPTZ '2026-11-01 09:00:00.123456+00' + INTERVAL (i) SECOND AS tz,
        DATE '1969-12-30' + i::INTEGER AS d,
        CASE WHEN i % 11 = 10 THEN NULL ELSE ('\\xAA\\xFF\\x00\\x80' || i::VARCHAR)::BLOB END AS b,
        CASE WHEN i % 7 = 0 THEN 'nan'::DOUBLE WHEN i = 3 THEN 'inf'::DOUBLE ELSE i / 8 END AS x,
        INTERVAL 1 MONTH + INTERVAL (i) DAY AS span
      FROM range(40) t(i)) TO '${path}' (FORMAT parquet)`);
    return path;
  }

  it("reads binary as base64 of its bytes, timestamps in their unit and zone, dates as dates, NaN as NaN", async () => {
    const path = await typedInput();
    const got = records(await collect(openLocalSource(path, PARQUET).items)) as Record<string, unknown>[];
    expect(got[1]).toEqual({
      id: "r1",
      text: "ticket 1",
      ts: "2026-11-01T09:00:01.123456",
      tms: "2026-11-01T09:00:01.123",
      tns: "2026-11-01T09:00:01.123456789",
      tz: "2026-11-01T09:00:01.123456Z",
      d: "1969-12-31",
      b: Buffer.from([0xaa, 0xff, 0x00, 0x80, 0x31]).toString("base64"),
      x: 0.125,
      span: "P1M1D",
    });
    expect(got[0]).toMatchObject({ d: "1969-12-30", x: Number.NaN, span: "P1M" });
    expect(got[3]).toMatchObject({ x: Number.POSITIVE_INFINITY });
    expect(got[10]).toMatchObject({ b: null });
    // Every binary cell decodes to DuckDB's bytes.
    const blobs = await query(`SELECT id, to_base64(b) AS b FROM '${path}' ORDER BY id`);
    for (const row of blobs) expect(got.find((r) => r["id"] === row["id"])?.["b"]).toBe(row["b"]);
  });

  it("writes kept fields back with their types: DuckDB reads the same timestamps, dates, bytes and NaN from the Parquet answers", async () => {
    const input = await typedInput();
    const kept = ["ts", "tms", "tns", "tz", "d", "b", "x"];
    const keepJob = parseJob({ state: "text", id: "id", keep: kept, questions: { refund: { type: "noul" } } }, "job");
    const run = async (out: string, journal: string) =>
      runJob({
        job: keepJob,
        source: openLocalSource(input, PARQUET, { fields: ["text", "id", ...kept] }),
        evaluator: new FakeEvaluator(),
        journalPath: journal,
        answers: { target: localTarget(out), format: outputFormat(out) },
        errors: localTarget(`${out}.errors.jsonl`),
        usage: undefined,
        limiter: new RunLimiter({ requestsPerMinute: 1e9, tokensPerSecond: 1e12 }),
        concurrency: 4,
        pricePerMillion: 1,
        logger: createLogger({ level: "silent" }),
      });
    const out = join(dir, "kinds.parquet");
    expect((await run(out, `${out}.journal`)).verdict).toBe("done");
    const typesOf = async (path: string) =>
      Object.fromEntries((await query(`DESCRIBE SELECT * FROM '${path}'`)).map((r) => [r["column_name"], r["column_type"]]));
    const types = await typesOf(out);
    expect(types).toMatchObject({ ts: "TIMESTAMP", tns: "TIMESTAMP_NS", tz: "TIMESTAMP WITH TIME ZONE", d: "DATE", b: "VARCHAR", x: "DOUBLE" });
    // Each as DuckDB reads the input's (its TIMESTAMP_MS reads back as TIMESTAMP), with the file's unit and zone as the input's.
    const inputTypes = await typesOf(input);
    for (const column of ["ts", "tms", "tns", "tz", "d", "x"]) expect(types[column], column).toBe(inputTypes[column]);
    const logical = async (path: string) =>
      Object.fromEntries(
        (await query(`SELECT name, logical_type FROM parquet_schema('${path}') WHERE name IN ('ts', 'tms', 'tns', 'tz')`)).map((r) => [
          r["name"],
          r["logical_type"],
        ]),
      );
    expect(await logical(out)).toEqual(await logical(input));
    // Row for row against the input, in DuckDB: the same instants, dates and bytes, NaN where it was NaN.
    const same = await query(`SELECT count(*) AS n FROM '${input}' i JOIN '${out}' o USING (id)
      WHERE i.ts = o.ts AND i.tms = o.tms AND i.tns = o.tns AND i.tz = o.tz AND i.d = o.d
        AND (i.b IS NULL AND o.b IS NULL OR from_base64(o.b) = i.b)
        AND (isnan(i.x) AND isnan(o.x) OR i.x = o.x)`);
    expect(same).toEqual([{ n: 40 }]);
    expect(await query(`SELECT count(*) AS n FROM '${out}' WHERE isnan(x)`)).toEqual([{ n: 6 }]);
    expect(await query(`SELECT count(*) AS n FROM '${out}' WHERE isinf(x)`)).toEqual([{ n: 1 }]);

    // The same journal as CSV and as JSONL: CSV says NaN and Infinity, JSON has no word for them (null).
    const csv = join(dir, "kinds.csv");
    expect((await run(csv, `${out}.journal`)).verdict).toBe("done");
    const { parse } = await import("csv-parse/sync");
    const rows = parse(readFileSync(csv), { columns: true }) as Record<string, string>[];
    expect(rows[0]).toMatchObject({ x: "NaN", ts: "2026-11-01T09:00:00.123456", tz: "2026-11-01T09:00:00.123456Z", d: "1969-12-30" });
    expect(rows[3]).toMatchObject({ x: "Infinity", tns: "2026-11-01T09:00:03.123456789" });
    expect(await query(`SELECT count(*) AS n FROM read_csv('${csv}') WHERE isnan(x)`)).toEqual([{ n: 6 }]);
    const jsonl = join(dir, "kinds.jsonl");
    expect((await run(jsonl, `${out}.journal`)).verdict).toBe("done");
    const lines = readFileSync(jsonl, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { fields: Record<string, unknown> });
    expect(lines[0]?.fields).toMatchObject({ x: null, d: "1969-12-30", tms: "2026-11-01T09:00:00.123" });
    expect(lines[1]?.fields["x"]).toBe(0.125);
  });
});

describe("Parquet output", () => {
  const job = parseJob(
    {
      state: "text",
      id: "id",
      keep: ["meta.n", "meta.ratio", "tags", "flag", "name"],
      questions: {
        refund: { type: "noul" },
        team: { type: "choice", criteria: { billing: "money", shipping: "parcels", other: null } },
        urgency: { type: "score", criteria: ["low", "medium", "high"] },
      },
    },
    "job",
  );

  it("writes typed flat columns holding the same values as the CSV from the same journal (DuckDB reads them back)", async () => {
    const data = join(dir, "in.jsonl");
    const lines = Array.from({ length: 60 }, (_, i) =>
      JSON.stringify({
        id: `r${i}`,
        text: i % 10 === 9 ? "same" : `ticket ${i} ünïcødé ✓`,
        meta: { n: i, ratio: i % 2 ? i / 3 : i },
        tags: i % 4 ? [i, "x"] : { k: i },
        flag: i % 3 === 0,
        ...(i % 5 ? { name: `name ${i}` } : {}),
      }),
    );
    await import("node:fs/promises").then((fs) => fs.writeFile(data, lines.join("\n")));
    const out = join(dir, "answers.parquet");
    const result = await runJob({
      job,
      source: openLocalSource(data, JSONL),
      evaluator: new FakeEvaluator(),
      journalPath: `${out}.journal`,
      answers: { target: localTarget(out), format: outputFormat(out) },
      errors: localTarget(`${out}.errors.jsonl`),
      usage: undefined,
      output: {
        // The fake evaluator's answers are skewed; this test is about the columns, so batch calibration is forced.
        calibration: "batch",
        forceBatch: true,
        review: { policy: { thresholds: { team: 0.99 }, auditRate: 0, seed: 1 }, target: localTarget(join(dir, "review.parquet")) },
      },
      limiter: new RunLimiter({ requestsPerMinute: 1e9, tokensPerSecond: 1e12 }),
      concurrency: 4,
      pricePerMillion: 1,
      logger: createLogger({ level: "silent" }),
    });
    expect(result.status).toBe("done");
    const csv = join(dir, "answers.csv");
    // The same journal written as CSV: a rerun of the same input and job, every record resumed, nothing asked.
    const again = new FakeEvaluator();
    const rerun = await runJob({
      job,
      source: openLocalSource(data, JSONL),
      evaluator: again,
      journalPath: `${out}.journal`,
      answers: { target: localTarget(csv), format: outputFormat(csv) },
      errors: localTarget(join(dir, "e.jsonl")),
      output: { calibration: "batch", forceBatch: true },
      limiter: new RunLimiter({ requestsPerMinute: 1e9, tokensPerSecond: 1e12 }),
      concurrency: 4,
      pricePerMillion: 1,
      logger: createLogger({ level: "silent" }),
    });
    expect(rerun.verdict).toBe("done");
    expect(again.calls).toHaveLength(0);

    const types = Object.fromEntries((await query(`DESCRIBE SELECT * FROM '${out}'`)).map((r) => [r["column_name"], r["column_type"]]));
    expect(types).toMatchObject({
      id: "VARCHAR",
      line: "BIGINT",
      "meta.n": "BIGINT",
      "meta.ratio": "DOUBLE",
      flag: "BOOLEAN",
      name: "VARCHAR",
      "refund.noul": "DOUBLE",
      "refund.raw.noul": "DOUBLE",
      "team.choice": "VARCHAR",
      "team.confidence": "DOUBLE",
      "team.p.billing": "DOUBLE",
      "team.raw.p.other": "DOUBLE",
      "urgency.score": "DOUBLE",
      "urgency.level": "VARCHAR",
      "urgency.p.2": "DOUBLE",
      input_tokens: "BIGINT",
      dedup_of: "VARCHAR",
    });
    expect(types["tags"]).toMatch(/JSON|VARCHAR/);

    // The CSV, parsed, against the Parquet as DuckDB reads it: same columns, same order, same values.
    const { parse } = await import("csv-parse/sync");
    const csvRows = parse(readFileSync(csv), { columns: true }) as Record<string, string>[];
    const parquetRows = await query(`SELECT * FROM '${out}'`);
    expect(parquetRows).toHaveLength(60);
    expect(Object.keys(parquetRows[0] as object)).toEqual(Object.keys(csvRows[0] as object));
    const asCsv = (v: unknown) => (v === null ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));
    for (const [i, row] of parquetRows.entries()) {
      for (const [column, value] of Object.entries(row)) {
        const text = (csvRows[i] as Record<string, string>)[column];
        if (typeof value === "number" && text !== "") expect(value, `${column} of row ${i}`).toBeCloseTo(Number(text), 12);
        else if (column === "tags") expect(JSON.parse(String(value)), `${column} of row ${i}`).toEqual(JSON.parse(text as string));
        else expect(asCsv(value), `${column} of row ${i}`).toBe(text);
      }
    }
    expect(parquetRows.filter((r) => r["dedup_of"] !== null)).toHaveLength(5);
    expect(parquetRows.filter((r) => r["name"] === null)).toHaveLength(12);
    expect((parquetRows[3] as Record<string, unknown>)["urgency.level"]).toMatch(/^(low|medium|high)$/);

    // The review file is Parquet too, with its reason and audit columns.
    const review = await query(`SELECT review_reason, audit FROM '${join(dir, "review.parquet")}'`);
    expect(review.length).toBe(result.summary.review?.below_threshold);
    expect(review[0]).toMatchObject({ audit: false, review_reason: expect.stringMatching(/^team 0\.\d{3} < 0\.99$/) });

    // `assess` and `report` read Parquet answers as they read the CSV.
    // (`line` is where a row sits in its file: the CSV's header takes line 1.)
    const read = async (path: string) => {
      const rows = [];
      // The answers, not `record` (the row as each format types it: CSV text, Parquet typed values).
      for await (const { line, record, ...r } of await readAnswers(path, {})) rows.push(r);
      return rows;
    };
    const fromParquet = await read(out);
    expect(fromParquet).toHaveLength(60);
    expect(fromParquet).toEqual(await read(csv));
  });

  it("writes a row group per ROW_GROUP_ROWS rows as it goes, and a valid empty file for no rows", async () => {
    const columns = flatColumns({ ok: { type: "noul" } }, []);
    const row = (i: number): OutputRow => ({
      entry: { k: "answer", seq: i, line: i + 1, source: "s", id: `r${i}`, h: "", model: "m", answers: {}, usage: { input_tokens: i, output_tokens: 1 } },
      answers: { ok: { type: "noul", noul: i / 2500 } },
    });
    const path = join(dir, "groups.parquet");
    const file = partialFile(path);
    let shipped = 0;
    const writer = sinkWriter({ write: (chunk) => ((shipped += chunk.length), file.write(chunk)) }, new ParquetEncoder(columns, 1000));
    for (let i = 0; i < 2500; i++) await writer.row(row(i));
    const beforeEnd = shipped;
    await writer.end();
    await file.commit();
    // Two full row groups had gone to the file before the end: the writer holds one group, not the file.
    expect(beforeEnd).toBeGreaterThan(0);
    expect(await query(`SELECT count(*) AS n, sum("ok.noul") AS s, max(input_tokens) AS t FROM '${path}'`)).toEqual([
      { n: 2500, s: expect.closeTo(((2499 * 2500) / 2 / 2500) as number, 9), t: 2499 },
    ]);
    expect(await query(`SELECT count(DISTINCT row_group_id) AS g FROM parquet_metadata('${path}')`)).toEqual([{ g: 3 }]);

    const empty = join(dir, "empty.parquet");
    const out = partialFile(empty);
    await sinkWriter(out, new ParquetEncoder(columns)).end();
    await out.commit();
    expect(await query(`SELECT count(*) AS n FROM '${empty}'`)).toEqual([{ n: 0 }]);
    expect((await query(`DESCRIBE SELECT * FROM '${empty}'`)).map((r) => r["column_name"])).toEqual(columns.map((c) => c.name));
    // And our reader reads it as an empty input, its progress at the file's size.
    const source = openLocalSource(empty, PARQUET);
    expect(await collect(source.items)).toEqual([]);
    expect(source.progress().bytes).toBe(statSync(empty).size);
  });
});
