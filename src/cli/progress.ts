/**
 * Progress for long operations: a redrawn bar on a TTY, and on anything else
 * one JSON line per 10% so logs stay readable.
 */
import { formatBytes } from "../records/text.js";
export interface ProgressBar {
  update(done: number, total: number | undefined, note?: string): void;
  finish(note?: string): void;
}

/** Formats a count: bytes for downloads, plain numbers otherwise. */
export type Unit = "bytes" | "items";

export function progressBar(label: string, unit: Unit = "items", stream: NodeJS.WriteStream = process.stderr): ProgressBar {
  const started = Date.now();
  const fmt = (n: number) => (unit === "bytes" ? formatBytes(n) : n.toLocaleString("en-US"));
  let lastDecile = -1;
  let lastDraw = 0;
  return {
    update(done, total, note) {
      const fraction = total ? Math.min(1, done / total) : undefined;
      if (stream.isTTY) {
        const now = Date.now();
        if (now - lastDraw < 100 && fraction !== 1) return;
        lastDraw = now;
        const seconds = (now - started) / 1000;
        const rate = done / Math.max(seconds, 1e-3);
        const width = 28;
        const bar = fraction === undefined ? "" : `[${"#".repeat(Math.round(fraction * width)).padEnd(width, ".")}] `;
        const eta = fraction && fraction < 1 ? ` eta ${Math.ceil((total! - done) / Math.max(rate, 1e-9))}s` : "";
        const of = total ? ` / ${fmt(total)}` : "";
        stream.write(`\r${label} ${bar}${fmt(done)}${of} ${fmt(Math.round(rate))}/s${eta}${note ? ` ${note}` : ""}\x1b[K`);
        return;
      }
      const decile = fraction === undefined ? -1 : Math.floor(fraction * 10);
      if (decile > lastDecile) {
        lastDecile = decile;
        stream.write(`${JSON.stringify({ progress: label, done, total, percent: decile * 10 })}\n`);
      }
    },
    finish(note) {
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      if (stream.isTTY) stream.write(`\r${label} done in ${seconds}s${note ? `: ${note}` : ""}\x1b[K\n`);
      else stream.write(`${JSON.stringify({ progress: label, finished: true, seconds: Number(seconds), note })}\n`);
    },
  };
}
