/**
 * CSV as spreadsheets and other tools write it, and as spreadsheets open
 * ours: a semicolon export (Excel's CSV in many locales) refused with the
 * flag that reads it, then read with it; records that would be read wrong
 * (more cells than the header, a quote left open, CR CR LF line ends) each
 * with a verdict; kept cells that a spreadsheet would run as formulas
 * written so it does not (LibreOffice Calc opens the files), unless told.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { parse } from "csv-parse/sync";
import { describe, expect, it } from "vitest";
import { CSV, delimitedWriter, formulaEscaped } from "../../src/records/csv.js";
import type { Column } from "../../src/records/format.js";
import type { SourceItem } from "../../src/records/source.js";
import { itemsOf } from "../../src/records/sources.js";
import { createLogger } from "../../src/logging/logger.js";
import { loadJob } from "../../src/records/job.js";
import { openSource } from "../../src/runner/prepare.js";
import { runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";
import { hasCalc, openedInCalc, SOFFICE } from "../support/spreadsheet.js";

const dir = mkdtempSync(join(tmpdir(), "te-csv-"));
const env = { TYPED_EVAL_LOG_LEVEL: "warn", TYPED_EVAL_THREADS: "1", TYPED_EVAL_MODEL_PATH: generatedModel(TINY) };
const cli = (...args: string[]) => runInProcess(args, env, { cwd: dir });
const jobFile = join(dir, "job.json");
writeFileSync(jobFile, JSON.stringify({ state: "body", id: "ticket_id", keep: ["note", "amount"], questions: { urgent: { type: "noul" } } }));

/** Records of a CSV text as the reader gives them (`[line, record or error]`), and the warnings it gave. */
async function read(text: string, settings: Record<string, string> = {}): Promise<{ items: [number, unknown][]; warnings: string[] }> {
  const warnings: string[] = [];
  const items: [number, unknown][] = [];
  const reading = { settings, warn: (m: string) => warnings.push(m), takesOptions: true };
  for await (const item of itemsOf(Readable.from([Buffer.from(text)]), CSV, "t.csv", 0, reading) as AsyncIterable<SourceItem>)
    items.push([item.line, "record" in item ? item.record : item.error]);
  return { items, warnings };
}

/** Seventeen records (a header, then T0..T16), each line ending in `end`. */
const seventeen = (end: string, row: (i: number) => string = (i) => `T${i},body ${i},note ${i},${i}`) =>
  ["ticket_id,body,note,amount", ...Array.from({ length: 17 }, (_, i) => row(i))].join(end) + end;

describe("a CSV separated by semicolons or tabs", () => {
  // As Excel saves "CSV UTF-8" where the decimal separator is a comma: a BOM, semicolons, CRLF, a cell quoted for its ";".
  const excel = join(dir, "export.csv");
  writeFileSync(excel, '\ufeffticket_id;body;note;amount\r\nT1;parcel late;first;-3,5\r\nT2;"refund; twice";second;4\r\n');

  it("is refused before anything is asked, naming the flag that reads it (exit 2); read with it, every record answered", async () => {
    const refused = await cli("run", excel, "--job", jobFile, "-o", "semi.jsonl");
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      'export.csv: its header reads as one column, "ticket_id;body;note;amount", holding semicolons: a CSV separated by semicolons (as Excel writes CSV in many locales)? pass --csv-delimiter ";"',
    );
    expect(existsSync(join(dir, "semi.jsonl.journal"))).toBe(false);

    const r = await cli("run", excel, "--job", jobFile, "-o", "semi.jsonl", "--csv-delimiter", ";");
    expect(r.code, r.stderr).toBe(0);
    const rows = readFileSync(join(dir, "semi.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(rows.map((row) => [row.id, row.line, row.fields])).toEqual([
      ["T1", 2, { note: "first", amount: "-3,5" }],
      ["T2", 3, { note: "second", amount: "4" }],
    ]);
  });

  it("names tab for a tab-separated .csv, and refuses a delimiter that cannot be one (exit 2)", async () => {
    const tabbed = join(dir, "tabbed.csv");
    writeFileSync(tabbed, "ticket_id\tbody\tnote\tamount\nT1\tlate\tx\t1\n");
    const refused = await cli("run", tabbed, "--job", jobFile, "-o", "tab.jsonl");
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/holding tabs: a CSV separated by tabs .*\? pass --csv-delimiter tab$/m);
    expect((await cli("run", tabbed, "--job", jobFile, "-o", "tab.jsonl", "--csv-delimiter", "tab")).code).toBe(0);
    const bad = await cli("run", tabbed, "--job", jobFile, "-o", "tab.jsonl", "--csv-delimiter", ";;");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--csv-delimiter takes one character (not a quote or a line break), or "tab", not ";;"');
  });

  it("is read as one column when the delimiter is the one chosen, and says so where the command has no flag for it", async () => {
    const { items } = await read("a;b\n1;2\n", { "csv-delimiter": "," });
    expect(items).toEqual([[2, { "a;b": "1;2" }]]);
    const quiet = itemsOf(Readable.from([Buffer.from("a;b\n1;2\n")]), CSV, "gold.csv");
    await expect(quiet.next()).rejects.toThrow(/\? save it with commas between cells \(typed-eval run takes --csv-delimiter ";"\)$/);
  });
});

describe("records that would be read wrong", () => {
  it("more cells than the header: an error row naming the line and the cells beyond (a trailing empty cell is nothing lost)", async () => {
    const { items } = await read(seventeen("\n", (i) => (i === 5 ? "T5,charged, twice,n,1" : i === 6 ? "T6,b,n,6," : `T${i},b,n,${i}`)));
    expect(items).toHaveLength(17);
    expect(items[5]).toEqual([
      7,
      'CSV error in the record at line 7: 5 cells where the header names 4 (beyond them: "1"); a comma inside a cell that is not quoted? quote that cell',
    ]);
    expect(items[6]).toEqual([8, { ticket_id: "T6", body: "b", note: "n", amount: "6" }]);
  });

  it("a quote closed on a later line: one record, as RFC 4180 reads it, and a warning naming the line that looked like a record", async () => {
    const { items, warnings } = await read(seventeen("\n", (i) => (i === 3 ? 'T3,"my parcel,n,3' : i === 4 ? 'T4,late",n,4' : `T${i},b,n,${i}`)));
    expect(items).toHaveLength(16);
    expect(items[3]).toEqual([5, { ticket_id: "T3", body: "my parcel,n,3\nT4,late", note: "n", amount: "4" }]);
    expect(items[4]?.[0]).toBe(7);
    expect(warnings).toEqual([
      "t.csv: the record at line 5 has a quoted cell running to line 6, and line 6 reads as a record of its own: a quote left open? It was read as one record (a quoted cell may hold line breaks); if line 6 is a record, close the quote on line 5",
    ]);
    // A cell that holds line breaks of prose is no warning.
    expect((await read('id,text\n1,"Dear team\nthe parcel is late"\n2,x\n')).warnings).toEqual([]);
  });

  it("CR CR LF line ends: one line end each (no phantom record, lines as an editor shows them), said once", async () => {
    const { items, warnings } = await read(seventeen("\r\r\n"));
    expect(items.map(([line]) => line)).toEqual(Array.from({ length: 17 }, (_, i) => i + 2));
    expect(items[16]?.[1]).toEqual({ ticket_id: "T16", body: "body 16", note: "note 16", amount: "16" });
    expect(warnings).toEqual(["t.csv: its lines end in CR CR LF (Windows line ends added twice over); each is read as one line end"]);
    // Cut anywhere, the stream reads the same.
    const bytes = Buffer.from(seventeen("\r\r\n"));
    for (const at of [8, 26, 27, 28, 29]) {
      const parts = [bytes.subarray(0, at), bytes.subarray(at)];
      const lines: number[] = [];
      for await (const item of itemsOf(Readable.from(parts), CSV, "t.csv")) lines.push(item.line);
      expect(lines, `cut at ${at}`).toEqual(items.map(([line]) => line));
    }
  });

  it("in a run: the errors file has the record with too many cells (exit 1), the run's log the two warnings", async () => {
    const input = join(dir, "seventeen.csv");
    writeFileSync(
      input,
      seventeen("\r\r\n", (i) => (i === 2 ? "T2,a,b,c,d" : i === 9 ? 'T9,"open,n,9' : i === 10 ? 'T10,closed",n,10' : `T${i},b,n,${i}`)),
    );
    const out = join(dir, "seventeen.jsonl");
    const r = await cli("run", input, "--job", jobFile, "-o", out);
    expect(r.code, r.stderr).toBe(1);
    expect(readFileSync(out, "utf8").trim().split("\n")).toHaveLength(15);
    const errors = readFileSync(`${out}.errors.jsonl`, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(errors).toMatchObject([{ line: 4, message: expect.stringContaining("5 cells where the header names 4") }]);
    // The run opens its input with its logger for the warnings (a command in process cannot see the log: read it here).
    const lines: string[] = [];
    const logger = createLogger({ level: "warn", destination: { write: (line: string) => void lines.push(line) } });
    const settings = { input, jobFile, model: "default", apiKeyEnv: "K", timeoutSeconds: 1, seed: 1, formats: {} };
    for await (const _ of (await openSource(settings, loadJob(jobFile), logger)).items);
    expect(lines.map((l) => JSON.parse(l) as { level: number; input: string; msg: string }).map((l) => [l.level, l.input, l.msg])).toEqual([
      [40, input, `${input}: its lines end in CR CR LF (Windows line ends added twice over); each is read as one line end`],
      [40, input, expect.stringContaining("the record at line 11 has a quoted cell running to line 12, and line 12 reads as a record of its own")],
    ]);
  });
});

describe("kept cells a spreadsheet would run", () => {
  const cells = ["=1+2", '=CONCATENATE("x";"y")', "@SUM(1;2)", "+49 30 1234", "-", "-3", "+5", "-1,5", "1e3", "plain", "'quoted already"];

  it("are written with a leading ' (numbers such as -3 as they are); --no-csv-escape-formulas writes them as they are", () => {
    expect(cells.map(formulaEscaped)).toEqual([
      "'=1+2",
      '\'=CONCATENATE("x";"y")',
      "'@SUM(1;2)",
      "'+49 30 1234",
      "'-",
      "-3",
      "+5",
      "-1,5",
      "1e3",
      "plain",
      "'quoted already",
    ]);
    const columns: Column<unknown[]>[] = [
      { name: "kept", kind: "string", value: (r) => r[0], fromInput: true },
      { name: "ours", kind: "string", value: (r) => r[0] },
      { name: "n", kind: "double", value: (r) => r[1], fromInput: true },
    ];
    const write = (settings: Record<string, boolean>) => {
      const encoder = delimitedWriter(",")({ columns, record: () => ({}) }, settings);
      return (encoder.row(["=1+2", -3]) as string) + (encoder.end() as string);
    };
    expect(write({})).toBe("kept,ours,n\n'=1+2,=1+2,-3\n");
    expect(write({ "csv-escape-formulas": false })).toBe("kept,ours,n\n=1+2,=1+2,-3\n");
  });

  it.skipIf(!hasCalc)("LibreOffice Calc shows the escaped cells as text and the numbers as numbers, and runs them without the escape", async () => {
    const input = join(dir, "formulas.csv");
    const quote = (c: string) => (/[",]/.test(c) ? `"${c.replaceAll('"', '""')}"` : c);
    writeFileSync(
      input,
      `ticket_id,body,note,amount\n${cells.map((c, i) => `T${i},ticket ${i},${quote(c)},${quote(cells[(i + 5) % cells.length] as string)}`).join("\n")}\n`,
    );
    const escaped = join(dir, "escaped.csv");
    const raw = join(dir, "raw.csv");
    expect((await cli("run", input, "--job", jobFile, "-o", escaped)).code).toBe(0);
    expect((await cli("run", input, "--job", jobFile, "-o", raw, "--no-csv-escape-formulas")).code).toBe(0);
    const opened = await openedInCalc([escaped, raw]);
    const noteOf = (path: string) => (parse(opened.get(path) as string, { columns: true }) as Record<string, string>[]).map((r) => [r["note"], r["amount"]]);
    // Calc shows an escaped cell as the text the input had, with its quote, never a result; a cell left alone (a number,
    // plain text) it shows as it shows the unescaped file's (+5 as the number 5).
    const [withEscape, without] = [noteOf(escaped), noteOf(raw)];
    for (const [i, cell] of cells.entries()) {
      for (const [column, text] of [cell, cells[(i + 5) % cells.length] as string].entries()) {
        const expected = formulaEscaped(text) === text ? without[i]?.[column] : formulaEscaped(text);
        expect(withEscape[i]?.[column], text).toBe(expected);
      }
    }
    expect(withEscape[0]?.[1]).toBe("-3");
    // Unescaped, Calc runs them: the test would see it.
    expect(
      noteOf(raw)
        .slice(0, 2)
        .map(([note]) => note),
    ).toEqual(["3", "xy"]);
  });
});

if (!hasCalc) {
  process.stderr.write(
    `\n*** SKIPPED the spreadsheet test of CSV outputs: no LibreOffice at ${SOFFICE} (apt-get install -y --no-install-recommends libreoffice-calc-nogui, or set SOFFICE_PATH) ***\n\n`,
  );
}
