/** Token limits of spec section 8 ("64k" and "32k", read as powers of two like context windows). */
export const MAX_REQUEST_TOKENS = 65_536;
export const MAX_LONGEST_QUESTION_TOKENS = 32_768;
