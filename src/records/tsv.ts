/**
 * TSV: tab-separated text with a header row, quoted as CSV is where a cell
 * holds a tab, a quote or a line break (as pandas' `read_csv(sep="\t")`,
 * spreadsheets and csv-parse read it), so any text survives the round trip.
 */
import { CSV_BOM, CSV_ESCAPE_FORMULAS, delimitedReader, delimitedWriter } from "./csv.js";
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
  read: {
    stream: delimitedReader({
      title: "TSV",
      delimiter: () => ({ delimiter: "\t", chosen: false }),
      flagsFor: (found) => (found === "," ? "--format csv" : `--format csv --csv-delimiter ${JSON.stringify(found)}`),
    }),
  },
  write: delimitedWriter("\t"),
  options: [CSV_BOM, CSV_ESCAPE_FORMULAS],
};
