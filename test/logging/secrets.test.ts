/** The scrubber: a registered key, or any piece of it of 8 characters or more, never survives `scrub`. */
import { afterEach, describe, expect, it } from "vitest";
import { FRAGMENT, forgetSecrets, REDACTED, registerSecret, scrub, scrubbedJson } from "../../src/logging/secrets.js";

const KEY = "te_Zq8CANARYv3Lm7Pw2Rt5xK9b";

afterEach(() => forgetSecrets());

describe("scrub", () => {
  it("replaces the key, its prefixes, suffixes and middles of 8 characters or more, and leaves shorter pieces and other text", () => {
    registerSecret(KEY);
    expect(scrub(`InvalidArgument Authorization ${KEY} rest`)).toBe(`InvalidArgument Authorization ${REDACTED} rest`);
    // A one-line message cut the key short, or a body that carried its end or middle only.
    for (const piece of [KEY.slice(0, FRAGMENT), KEY.slice(0, 15), KEY.slice(-FRAGMENT), KEY.slice(-13), KEY.slice(5, 5 + FRAGMENT), KEY.slice(3, 20)]) {
      const out = scrub(`said: ${piece}…`);
      expect(out).toBe(`said: ${REDACTED}…`);
    }
    // Seven characters are not taken for the key: "te_Zq8C" alone protects nothing and could be anything.
    expect(scrub(`x ${KEY.slice(0, FRAGMENT - 1)} y`)).toBe(`x ${KEY.slice(0, FRAGMENT - 1)} y`);
    expect(scrub("nothing secret here, 24 records, te_ and CANARY")).toBe("nothing secret here, 24 records, te_ and CANARY");
  });

  it("replaces each occurrence once, joining pieces that touch or overlap", () => {
    registerSecret(KEY);
    expect(scrub(`${KEY}${KEY} and ${KEY.slice(0, 10)} and ${KEY}`)).toBe(`${REDACTED} and ${REDACTED} and ${REDACTED}`);
  });

  it("catches the key JSON-escaped and URL-encoded, and keeps scrubbed JSON parseable", () => {
    const odd = 'k3y"with\\quote+slash/=';
    registerSecret(odd);
    const json = JSON.stringify({ detail: `header was ${odd}`, n: 1 });
    const out = scrub(json);
    expect(out).not.toContain("with");
    expect(JSON.parse(out)).toEqual({ detail: `header was ${REDACTED}`, n: 1 });
    expect(scrub(`?token=${encodeURIComponent(odd)}&x=1`)).toBe(`?token=${REDACTED}&x=1`);
  });

  it("replaces any Bearer credential, registered or not, but not prose about one", () => {
    expect(scrub("Authorization: Bearer abcdef123456")).toBe(`Authorization: Bearer ${REDACTED}`);
    expect(scrub('{"authorization":"bearer xyz987654321"}')).toBe(`{"authorization":"bearer ${REDACTED}"}`);
    expect(scrub("send the header `Authorization: Bearer <API key>`")).toBe("send the header `Authorization: Bearer <API key>`");
    expect(scrub(`Bearer ${REDACTED}`)).toBe(`Bearer ${REDACTED}`);
  });

  it("registers nothing shorter than 8 characters: a key like 'k' would corrupt every text", () => {
    registerSecret("k");
    registerSecret("abcdefg");
    expect(scrub('{"k":"answer","id":"abcdefg"}')).toBe('{"k":"answer","id":"abcdefg"}');
  });

  it("scrubbedJson scrubs a whole document at any depth", () => {
    registerSecret(KEY);
    const text = scrubbedJson({ reason: `bad (${KEY})`, nested: { list: [KEY.slice(2, 14)] } }, 2);
    expect(text).not.toContain(KEY.slice(2, 10));
    expect(JSON.parse(text)).toEqual({ reason: `bad (${REDACTED})`, nested: { list: [REDACTED] } });
  });
});
