/** The usage summary's numbers for people: seconds to the millisecond, no speed for a run that sent nothing. */
import { describe, expect, it } from "vitest";
import { describe as describeUsage, emptySummary, finish } from "../../src/records/usage.js";

describe("usage summary", () => {
  it("rounds seconds summed over runs to the millisecond", () => {
    const s = emptySummary("m-1.0.0", 0);
    // Two runs' seconds summed in binary: 10.844999999999999 before rounding.
    s.seconds = 4.345 + 6.5;
    s.this_run = {
      started: "2026-11-23T02:00:00.000Z",
      seconds: 0.1 + 0.2,
      records: { read: 0, answered: 0, failed: 0, resumed: 0 },
      requests: { sent: 0, retries: 0, rate_limited: 0, overloaded: 0 },
      tokens: { input: 0, wasted_input: 0 },
      cost_usd: 0,
    };
    expect(s.seconds).not.toBe(10.845);
    const done = finish(s);
    expect(done.seconds).toBe(10.845);
    expect(done.this_run?.seconds).toBe(0.3);
    expect(JSON.stringify(done)).not.toMatch(/\d\.\d{10,}/);
  });

  it("prints no records/s when no request was sent (a run answered from its journal)", () => {
    const s = emptySummary("m-1.0.0", 0);
    s.records.read = s.records.answered = s.records.resumed = 500;
    s.seconds = 1;
    expect(describeUsage(finish(s))).not.toMatch(/records\/s/);
    s.requests.sent = 500;
    expect(describeUsage(finish(s))).toMatch(/, 500\.0 records\/s$/);
  });
});
