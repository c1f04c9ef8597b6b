/**
 * Debian's LibreOffice Calc, headless, as the spreadsheet that opens the CSV
 * outputs (`apt-get install -y --no-install-recommends libreoffice-calc-nogui`;
 * .ci/run installs it). It imports a CSV as a double-click would (formulas
 * evaluated) and saves what its cells show as CSV again: a cell it ran as a
 * formula comes back as its result.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { promisify } from "node:util";

export const SOFFICE = process.env["SOFFICE_PATH"] ?? "/usr/bin/soffice";
export const hasCalc = existsSync(SOFFICE);

/** Each CSV file as Calc shows it after opening it (comma-separated, UTF-8), by path; one Calc start for all of them. */
export async function openedInCalc(files: readonly string[]): Promise<Map<string, string>> {
  const work = mkdtempSync(join(tmpdir(), "te-calc-"));
  const out = join(work, "out");
  await promisify(execFile)(
    SOFFICE,
    [
      `-env:UserInstallation=file://${join(work, "profile")}`,
      "--headless",
      // Comma, double quote, UTF-8, from line 1: what Calc picks for a .csv opened from a file manager.
      "--infilter=CSV:44,34,76,1",
      "--convert-to",
      "csv:Text - txt - csv (StarCalc):44,34,76,1",
      "--outdir",
      out,
      ...files,
    ],
    { timeout: 60_000 },
  );
  return new Map(files.map((f) => [f, readFileSync(join(out, basename(f)), "utf8")]));
}
