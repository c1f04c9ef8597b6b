/** Routes each request to the evaluator of the model it names; unknown names are a 422 listing the valid ones. */
import { UnprocessableEntityError } from "../api/errors.js";
import type { ModelMetadata, SystemOneRequest } from "../api/schema.js";
import type { EvaluateOptions, Evaluation, Evaluator } from "./evaluator.js";

export interface Route {
  /** Every name that selects this evaluator: aliases and versioned ids. */
  names: readonly string[];
  evaluator: Evaluator;
}

/** Asked for the prompt of a model whose prompt is rendered elsewhere (a remote endpoint). */
export class PromptUnavailableError extends Error {
  override name = "PromptUnavailableError";
  constructor(model: string) {
    super(`model ${model} is served by a remote endpoint, which renders its own prompt: --print-prompt shows embedded models' prompts only`);
  }
}

export class ModelRouter implements Evaluator {
  private readonly byName = new Map<string, Evaluator>();
  private readonly evaluators: Evaluator[];

  constructor(routes: readonly Route[]) {
    for (const route of routes) {
      for (const name of route.names) {
        if (this.byName.has(name)) throw new Error(`model name "${name}" is used by two models`);
        this.byName.set(name, route.evaluator);
      }
    }
    this.evaluators = [...new Set(routes.map((r) => r.evaluator))];
  }

  /** The evaluator a name selects, if any. */
  lookup(name: string): Evaluator | undefined {
    return this.byName.get(name);
  }

  /** All names accepted in `model`, sorted. */
  names(): string[] {
    return [...this.byName.keys()].sort();
  }

  models(): ModelMetadata[] {
    return this.evaluators.flatMap((e) => e.models());
  }

  /** The evaluator a model name selects; a 422 listing the valid names when none. */
  route(model: string): Evaluator {
    const evaluator = this.byName.get(model);
    if (!evaluator) {
      const valid = this.names();
      throw new UnprocessableEntityError([
        {
          type: "value_error",
          loc: ["body", "model"],
          msg: `Unknown model '${model}'. Valid names: ${valid.join(", ")}`,
          input: model,
          ctx: { expected: valid },
        },
      ]);
    }
    return evaluator;
  }

  identity(model: string): string {
    return this.route(model).identity(model);
  }

  promptText(request: SystemOneRequest): string {
    const evaluator = this.route(request.model);
    if (!evaluator.promptText) throw new PromptUnavailableError(request.model);
    return evaluator.promptText(request);
  }

  pricePerMillion(model: string): number | undefined {
    return this.route(model).pricePerMillion?.(model);
  }

  estimateInputTokens(request: SystemOneRequest): number {
    return this.route(request.model).estimateInputTokens(request);
  }

  evaluate(request: SystemOneRequest, options?: EvaluateOptions): Promise<Evaluation> {
    return this.route(request.model).evaluate(request, options);
  }

  async close(): Promise<void> {
    await Promise.all(this.evaluators.map((e) => e.close()));
  }
}
