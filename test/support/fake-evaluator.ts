/** An in-process `Evaluator` whose answers (or errors) the test decides: the runner's modules tested without a model or a network. */
import type { SystemOneRequest } from "../../src/api/schema.js";
import type { EvaluateOptions, Evaluation, Evaluator } from "../../src/evaluator/evaluator.js";
import { plausibleAnswers } from "./answers.js";

export interface FakeCall {
  request: SystemOneRequest;
  options: EvaluateOptions;
}

/** Answers every request validly; `noul` is the p(yes) of every yes/no answer. */
export function answer(request: SystemOneRequest, noul = 0.25): Evaluation {
  const tokens = JSON.stringify(request.state).length;
  return { response: { model: "fake-1.0.0", answers: plausibleAnswers(request.questions, noul), usage: { input_tokens: tokens, output_tokens: 1 } } };
}

export class FakeEvaluator implements Evaluator {
  readonly calls: FakeCall[] = [];

  /** `reply` answers the n-th call (0-based); throw from it to fail the attempt. */
  constructor(
    private readonly reply: (request: SystemOneRequest, call: number, options: EvaluateOptions) => Evaluation | Promise<Evaluation> = (r) => answer(r),
  ) {}

  estimateInputTokens(request: SystemOneRequest): number {
    return JSON.stringify(request.state).length;
  }

  exactTokenCounts(): boolean {
    return true;
  }

  async evaluate(request: SystemOneRequest, options: EvaluateOptions = {}): Promise<Evaluation> {
    const call = this.calls.length;
    this.calls.push({ request, options });
    return this.reply(request, call, options);
  }

  identity(model: string): string {
    return `fake:${model}`;
  }

  models() {
    return [];
  }

  async close(): Promise<void> {}
}
