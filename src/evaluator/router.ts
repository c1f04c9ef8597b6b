/** Routes each request to the evaluator of the model it names; unknown names are a 422 listing the valid ones. */
import { InvocationError, UnprocessableEntityError } from "../api/errors.js";
import type { ModelMetadata, EvaluatorRequest } from "../api/schema.js";
import type { FirstContactOptions, EvaluateOptions, Evaluation, Evaluator, ModelSet } from "./evaluator.js";

export interface Route {
  /** Every name that selects this evaluator: aliases and versioned ids. */
  names: readonly string[];
  evaluator: Evaluator;
}

/** An alias that names no served model, or a name already taken. */
export class AliasError extends Error {
  override name = "AliasError";
}

/** Asked for the prompt of a model whose prompt is rendered elsewhere (a remote endpoint). */
export class PromptUnavailableError extends InvocationError {
  override name = "PromptUnavailableError";
  constructor(model: string) {
    super(`model ${model} is served by a remote endpoint, which renders its own prompt: --print-prompt shows embedded models' prompts only`);
  }
}

export class ModelRouter implements ModelSet {
  private readonly byName = new Map<string, Evaluator>();
  private readonly evaluators: Evaluator[];
  private readonly aliases: ModelMetadata[] = [];

  constructor(routes: readonly Route[]) {
    for (const route of routes) {
      for (const name of route.names) {
        if (this.byName.has(name)) throw new Error(`model name "${name}" is used by two models`);
        this.byName.set(name, route.evaluator);
      }
    }
    this.evaluators = [...new Set(routes.map((r) => r.evaluator))];
  }

  /**
   * Another name for a served model (`serve --alias jev-latest=default`), so
   * clients written for another server run unchanged; listed in `models()`.
   * The response's `model` stays the versioned id of what answered.
   */
  addAlias(alias: string, target: string): void {
    const evaluator = this.byName.get(target);
    if (!evaluator) throw new AliasError(`--alias ${alias}=${target}: no served model is named "${target}"; served: ${this.names().join(", ")}`);
    if (this.byName.has(alias)) throw new AliasError(`--alias ${alias}=${target}: "${alias}" already names a served model`);
    this.byName.set(alias, evaluator);
    const of = evaluator.models()[0];
    this.aliases.push({ name: alias, description: `Alias of ${target}${of ? `: ${of.description}` : ""}`, release_date: of?.release_date ?? "1970-01-01" });
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
    return [...this.evaluators.flatMap((e) => e.models()), ...this.aliases];
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

  versionedId(model: string): string | undefined {
    return this.route(model).versionedId?.(model);
  }

  promptText(request: EvaluatorRequest): string {
    const evaluator = this.route(request.model);
    if (!evaluator.promptText) throw new PromptUnavailableError(request.model);
    return evaluator.promptText(request);
  }

  promptFormat(model: string): string | undefined {
    return this.route(model).promptFormat?.(model);
  }

  promptFingerprint(model: string, questions: EvaluatorRequest["questions"]): string {
    return this.route(model).promptFingerprint?.(model, questions) ?? "";
  }

  pricePerMillion(model: string): number | undefined {
    return this.route(model).pricePerMillion?.(model);
  }

  async firstContact(model: string, options?: FirstContactOptions): Promise<boolean> {
    return (await this.route(model).firstContact?.(model, options)) ?? false;
  }

  exactTokenCounts(model: string): boolean {
    return this.route(model).exactTokenCounts(model);
  }

  estimateInputTokens(request: EvaluatorRequest): number {
    return this.route(request.model).estimateInputTokens(request);
  }

  evaluate(request: EvaluatorRequest, options?: EvaluateOptions): Promise<Evaluation> {
    return this.route(request.model).evaluate(request, options);
  }

  async close(): Promise<void> {
    await Promise.all(this.evaluators.map((e) => e.close()));
  }
}
