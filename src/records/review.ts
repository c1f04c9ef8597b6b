/**
 * Why a row is in a run's review file: the verdict review routing gives it
 * (runner/output/review.ts) and the one text the flat formats write for it,
 * which the Label Studio export reads back from any format.
 */

/** A row's review verdict: the answers below their thresholds, and whether it was sampled for audit. */
export interface ReviewVerdict {
  reasons: { question: string; confidence: number; threshold: number }[];
  audit: boolean;
}

/** Why a row is in the review file, as the flat formats write it. */
export function reviewReason(v: ReviewVerdict | undefined): string {
  if (!v) return "";
  if (v.reasons.length === 0) return v.audit ? "audit sample" : "";
  return v.reasons.map((r) => `${r.question} ${r.confidence.toFixed(3)} < ${r.threshold}`).join("; ");
}
