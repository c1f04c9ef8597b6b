/** Debian's Chromium for the report tests, driven by playwright-core (no browser download). */
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";

export const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium";
export const hasChromium = existsSync(CHROMIUM);

export function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync"],
  });
}
