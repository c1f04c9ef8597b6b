/**
 * Request bodies: `application/json` only, UTF-8 only (RFC 8259 allows no
 * other encoding; a body that is not UTF-8 is a 400 naming the first bad
 * byte, where decoding it would turn those bytes into U+FFFD and answer a
 * question nobody asked), then parsed by `parseJsonBody` into its 422s.
 */
import { isUtf8 } from "node:buffer";
import { BadRequestError } from "../api/errors.js";
import { parseJsonBody } from "../api/json.js";
import { shared } from "./plugin.js";

/** The offset of the first byte that does not start a well-formed UTF-8 sequence (WHATWG's rules), or -1. */
export function invalidUtf8At(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i] as number;
    if (lead < 0x80) {
      i++;
      continue;
    }
    // The continuation bytes a lead byte needs, and the range of the first (which excludes overlong forms, surrogates and values past U+10FFFF).
    const [need, low, high] =
      lead >= 0xc2 && lead <= 0xdf
        ? [1, 0x80, 0xbf]
        : lead >= 0xe0 && lead <= 0xef
          ? [2, lead === 0xe0 ? 0xa0 : 0x80, lead === 0xed ? 0x9f : 0xbf]
          : lead >= 0xf0 && lead <= 0xf4
            ? [3, lead === 0xf0 ? 0x90 : 0x80, lead === 0xf4 ? 0x8f : 0xbf]
            : [0, 0, 0];
    if (need === 0) return i;
    for (let k = 1; k <= need; k++) {
      const byte = bytes[i + k];
      if (byte === undefined || byte < (k === 1 ? low : 0x80) || byte > (k === 1 ? high : 0xbf)) return i;
    }
    i += need + 1;
  }
  return -1;
}

/** The one content type parser of the app. */
export const bodyPlugin = shared((app, _options, done) => {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (_request, body, next) => {
    const bytes = body as Buffer;
    try {
      if (!isUtf8(bytes)) {
        const at = invalidUtf8At(bytes);
        const byte = (bytes[at] ?? 0).toString(16).padStart(2, "0");
        throw new BadRequestError(`Request body is not valid UTF-8: byte ${at} (0x${byte}) begins no well-formed UTF-8 sequence; send JSON encoded as UTF-8`);
      }
      next(null, parseJsonBody(bytes.toString("utf8")));
    } catch (error) {
      next(error as Error, undefined);
    }
  });
  done();
});
