/**
 * Request body parsing: JSON only, nesting bounded before parsing (so a
 * hostile body cannot exhaust the parser's stack), and every failure a
 * FastAPI-shaped 422 `json_invalid` at the byte position where it failed.
 * And the one way a JSON file given by path is read (accounts, registries,
 * calibrations, usage summaries).
 */
import { readFileSync } from "node:fs";
import { InvocationError, UnprocessableEntityError } from "./errors.js";

/** Deepest nesting of arrays and objects a body may have. */
export const MAX_JSON_DEPTH = 64;

/** The position at which `text` first nests deeper than `max`, or -1. */
export function depthExceededAt(text: string, max: number): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) {
      if (++depth > max) return i;
    } else if (c === 93 || c === 125) depth--;
  }
  return -1;
}

/**
 * Offset of the first JSON syntax error in `text` (run only after JSON.parse
 * failed: V8's messages do not always carry the position).
 * Long: a recursive-descent scanner whose small closures share one cursor;
 * split into functions, the cursor would be threaded through every one.
 */
export function syntaxErrorAt(text: string): number {
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i] as string)) i++;
  };
  const fail = () => {
    throw i;
  };
  const literal = (word: string) => (text.startsWith(word, i) ? (i += word.length) : fail());
  const string = () => {
    i++;
    for (;;) {
      if (i >= text.length) fail();
      const c = text.charCodeAt(i);
      if (c === 34) return void i++;
      if (c < 32) fail();
      if (c === 92) {
        const e = text[i + 1] ?? "";
        if (e === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) return void ((i += 1), fail());
          i += 6;
        } else if ('"\\/bfnrt'.includes(e) && e !== "") i += 2;
        else return void (i++, fail());
      } else i++;
    }
  };
  const number = () => {
    const match = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!match || match[0] === "-") fail();
    i += (match as RegExpExecArray)[0].length;
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      ws();
      if (text[i] === "}") return void i++;
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        string();
        ws();
        if (text[i] !== ":") fail();
        i++;
        value();
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "}") return void i++;
        else fail();
      }
    } else if (c === "[") {
      i++;
      ws();
      if (text[i] === "]") return void i++;
      for (;;) {
        value();
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "]") return void i++;
        else fail();
      }
    } else if (c === '"') string();
    else if (c === "t") literal("true");
    else if (c === "f") literal("false");
    else if (c === "n") literal("null");
    else if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) number();
    else fail();
  };
  try {
    value();
    ws();
    return i < text.length ? i : -1;
  } catch (at) {
    return at as number;
  }
}

function invalid(position: number, error: string): UnprocessableEntityError {
  return new UnprocessableEntityError([{ type: "json_invalid", loc: ["body", position], msg: "JSON decode error", input: {}, ctx: { error } }]);
}

/** Parses a request body, or throws the 422 a client should get. */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === "") throw new UnprocessableEntityError([{ type: "missing", loc: ["body"], msg: "Field required", input: null }]);
  const deep = depthExceededAt(text, MAX_JSON_DEPTH);
  if (deep >= 0) {
    // Valid JSON that is too deep is not a decode error: its own type, so clients can tell the two apart.
    throw new UnprocessableEntityError([
      {
        type: "json_too_deep",
        loc: ["body", deep],
        msg: `JSON nested deeper than ${MAX_JSON_DEPTH} levels (arrays and objects inside each other); flatten the state`,
        input: {},
        ctx: { max_depth: MAX_JSON_DEPTH },
      },
    ]);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw invalid(Math.max(0, syntaxErrorAt(text)), (error as Error).message);
  }
}

/** A JSON file's value; a missing, unreadable or malformed file throws `Kind` in one line: "cannot read <what> <path>: <why>". */
export function readJsonFile(path: string, what: string, Kind: new (message: string) => Error = InvocationError): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as unknown;
  } catch (error) {
    throw new Kind(`cannot read ${what} ${path}: ${(error as Error).message}`);
  }
}
