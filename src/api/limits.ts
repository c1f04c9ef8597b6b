/** Token limits of spec section 8 ("64k" and "32k", read as powers of two like context windows). */
export const MAX_REQUEST_TOKENS = 65_536;
export const MAX_LONGEST_QUESTION_TOKENS = 32_768;

/** Largest request body accepted (the server's limit; the runner refuses records whose request would exceed it). */
export const MAX_BODY_BYTES = 8 * 1024 * 1024;
