/**
 * TSV: tab-separated text with a header row, quoted as CSV is where a cell
 * holds a tab, a quote or a line break (as pandas' `read_csv(sep="\t")`,
 * spreadsheets and csv-parse read it), so any text survives the round trip.
 */
import { delimitedReader, delimitedWriter } from "./csv.js";
import type { Format } from "./format.js";

/** TSV (also `.tab`, `.tsv.gz`). */
export const TSV: Format = {
  name: "tsv",
  title: "TSV",
  extensions: [".tsv", ".tab"],
  contentType: "text/tab-separated-values",
  layout: "columns",
  typed: false,
  gzip: true,
  read: { stream: delimitedReader("\t", "TSV") },
  write: delimitedWriter("\t"),
};
