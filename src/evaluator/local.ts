/**
 * The embedded evaluator: renders the request, asks an engine for label
 * log-probabilities, and builds the answers with the readout math.
 */
import { createHash } from "node:crypto";
import { UnprocessableEntityError } from "../api/errors.js";
import { MAX_LONGEST_QUESTION_TOKENS, MAX_REQUEST_TOKENS } from "../api/limits.js";
import type { Answer, EvaluatorRequest, ModelMetadata, Question, Usage, ValidationErrorItem } from "../api/schema.js";
import type { Engine, ScoreTask, Token } from "../engines/engine.js";
import { ContextTooSmallError, type EvaluateOptions, type Evaluation, type Evaluator } from "./evaluator.js";
import { PROMPT_FORMAT, renderPrefix, renderQuestion, renderState, renderSystem, type ChatTemplate, type Segment } from "./prompt.js";
import { labelDistribution, labelMass } from "./readout.js";
import { joinUnits, kindOf, unitsOf } from "../questions/index.js";

export interface LocalModelConfig {
  /** Versioned id returned as the response `model`. */
  id: string;
  /** Calibration temperature applied to label log-probabilities. */
  temperature: number;
  template: ChatTemplate;
  /** Names listed for this model. */
  metadata: ModelMetadata[];
  /** Which weights: the file's SHA-256 when verified, else its path, size and modification time. */
  weights?: string;
  /** USD per million input tokens: the registry's for its own weights, 0 for a file it does not know. */
  price?: number;
}

/** A request turned into tokens: what the engine evaluates and what it will cost. */
export interface PreparedRequest {
  prefix: Token[];
  /** Leading tokens of `prefix` every request shares (the system text). */
  shared: number;
  /** The units asked (each question of a distribution type, each part of one with parts), and their questions. */
  names: string[];
  questions: Question[];
  tasks: ScoreTask[];
  usage: Usage;
}

const thousands = (n: number) => n.toLocaleString("en-US");

/** A state over this many bytes is checked against the window before it is tokenized (a MiB takes about 1.5 s on 2 cores). */
const LARGE_STATE_BYTES = 256 * 1024;

export class LocalEvaluator implements Evaluator {
  private readonly terminator: Token[];
  /** The system text's tokens: the same for every request, tokenized once. */
  private readonly head: Token[];
  /** Requests already tokenized (by `estimateInputTokens`), so `evaluate` does not tokenize twice. */
  private readonly prepared = new WeakMap<EvaluatorRequest, PreparedRequest>();

  constructor(
    private readonly engine: Engine,
    private readonly config: LocalModelConfig,
  ) {
    this.terminator = engine.tokenize(config.template.endOfTurn, true);
    this.head = this.tokens(renderSystem(config.template));
  }

  models(): ModelMetadata[] {
    return this.config.metadata;
  }

  pricePerMillion(): number | undefined {
    return this.config.price;
  }

  versionedId(): string {
    return this.config.id;
  }

  identity(): string {
    const { id, weights, template, temperature } = this.config;
    return JSON.stringify(["local", id, weights ?? "", template.name, temperature]);
  }

  private tokens(segments: readonly Segment[]): Token[] {
    return segments.flatMap((s) => this.engine.tokenize(s.text, s.control));
  }

  /**
   * Label token sequences. Distinct single tokens are read at one position;
   * otherwise every label gets the end-of-turn terminator, so that "1" and
   * "12" are different sequences and each option's probability is exact.
   */
  private labelTokens(labels: readonly string[]): Token[][] {
    const sequences = labels.map((label) => this.engine.tokenize(label, false));
    const firsts = new Set(sequences.map((s) => s[0]));
    const single = sequences.every((s) => s.length === 1) && firsts.size === sequences.length;
    return single ? sequences : sequences.map((s) => [...s, ...this.terminator]);
  }

  promptText(request: EvaluatorRequest): string {
    const text = (segments: readonly Segment[]) => segments.map((s) => s.text).join("");
    const prefix = renderPrefix(this.config.template, request.state);
    const parts = [
      `=== prompt format ${PROMPT_FORMAT} (recorded with every answer) ===`,
      `=== prefix: computed once per request (${this.tokens(prefix).length} tokens) ===`,
      text(prefix),
    ];
    for (const [name, { question }] of unitsOf(request.questions)) {
      const rendered = renderQuestion(this.config.template, question);
      parts.push(
        `=== question "${name}": ${this.tokens(rendered.suffix).length} tokens; the answer is read at the end, over the labels ${rendered.labels.join(", ")} ===`,
        text(rendered.suffix),
      );
    }
    return `${parts.join("\n")}\n`;
  }

  promptFormat(): string {
    return PROMPT_FORMAT;
  }

  promptFingerprint(_model: string, questions: EvaluatorRequest["questions"]): string {
    const text = (segments: readonly Segment[]) => segments.map((s) => `${s.control ? "C" : "T"}${s.text}`).join("\u0000");
    const hash = createHash("sha256").update(text(renderSystem(this.config.template)));
    // The state's framing, by two probes: text and structured data.
    hash.update(text(renderState("probe"))).update(text(renderState({ probe: [1, "x"] })));
    for (const { question } of unitsOf(questions).values()) {
      const rendered = renderQuestion(this.config.template, question);
      hash.update(text(rendered.suffix)).update(JSON.stringify(rendered.labels));
    }
    return hash.digest("hex").slice(0, 16);
  }

  exactTokenCounts(): boolean {
    return true;
  }

  estimateInputTokens(request: EvaluatorRequest): number {
    const prepared = this.prepare(request);
    this.prepared.set(request, prepared);
    return prepared.usage.input_tokens;
  }

  /** Tokenizes a request and checks it against the token limits; no model evaluation. */
  prepare(request: EvaluatorRequest): PreparedRequest {
    const head = this.head;
    const state = renderState(request.state);
    this.refuseBeyondWindow(state);
    const prefix = [...head, ...this.tokens(state)];
    const units = [...unitsOf(request.questions)];
    const names = units.map(([name]) => name);
    const questions = units.map(([, unit]) => unit.question);
    const tasks = questions.map((question) => {
      const rendered = renderQuestion(this.config.template, question);
      return { suffix: this.tokens(rendered.suffix), labels: this.labelTokens(rendered.labels) };
    });
    const suffixTokens = tasks.reduce((sum, t) => sum + t.suffix.length, 0);
    const positions = tasks.reduce((sum, t) => sum + positionsToRead(t.labels), 0);
    this.checkLimits(prefix.length, names, tasks);
    return { prefix, shared: head.length, names, questions, tasks, usage: { input_tokens: prefix.length + suffixTokens, output_tokens: positions } };
  }

  /**
   * A state that cannot fit the window whatever its tokens: refused from its
   * byte length alone. Tokenizing a state near the 8 MiB body limit takes
   * seconds of CPU, which any client could otherwise make the server spend.
   */
  private refuseBeyondWindow(state: readonly Segment[]): void {
    const window = this.engine.contextSize;
    const bytes = state.reduce((sum, s) => sum + Buffer.byteLength(s.text), 0);
    // Below this, tokenizing costs little and says exactly how many tokens (and what window would do).
    if (bytes <= Math.max(window, LARGE_STATE_BYTES)) return;
    const most = this.engine.maxTokenBytes?.();
    if (most === undefined) return;
    const least = Math.ceil(bytes / most);
    if (least <= window) return;
    throw new UnprocessableEntityError([
      {
        type: "too_long",
        loc: ["body", "state"],
        msg: `The state is at least ${thousands(least)} tokens (${thousands(bytes)} bytes, at most ${most} bytes a token); the model's context window is ${thousands(window)}.`,
        ctx: { field_type: "Tokens", max_length: window, actual_length: least },
      },
    ]);
  }

  private checkLimits(prefixLength: number, names: readonly string[], tasks: readonly ScoreTask[]): void {
    const errors: ValidationErrorItem[] = [];
    const total = prefixLength + tasks.reduce((sum, t) => sum + t.suffix.length, 0);
    if (total > MAX_REQUEST_TOKENS) {
      errors.push({
        type: "too_long",
        loc: ["body"],
        msg: `State plus all questions is ${thousands(total)} tokens; the limit is ${thousands(MAX_REQUEST_TOKENS)}. Split the questions over several requests.`,
        ctx: { field_type: "Tokens", max_length: MAX_REQUEST_TOKENS, actual_length: total },
      });
    }
    const window = this.engine.contextSize;
    let need = 0;
    let overWindow = 0;
    tasks.forEach((task, i) => {
      const name = names[i] as string;
      const withQuestion = prefixLength + task.suffix.length;
      const deepest = withQuestion + Math.max(...task.labels.map((l) => l.length)) - 1;
      if (withQuestion > MAX_LONGEST_QUESTION_TOKENS) {
        errors.push({
          type: "too_long",
          loc: ["body", "questions", name],
          msg: `State plus question '${name}' is ${thousands(withQuestion)} tokens; the limit is ${thousands(MAX_LONGEST_QUESTION_TOKENS)}.`,
          ctx: { field_type: "Tokens", max_length: MAX_LONGEST_QUESTION_TOKENS, actual_length: withQuestion },
        });
      } else if (deepest > window) {
        need = Math.max(need, deepest);
        overWindow++;
        errors.push({
          type: "too_long",
          loc: ["body", "questions", name],
          msg: `State plus question '${name}' needs ${thousands(deepest)} tokens; the model's context window is ${thousands(window)}.`,
          ctx: { field_type: "Tokens", max_length: window, actual_length: deepest },
        });
      }
    });
    if (errors.length === 0) return;
    // Only the window is too small: a bigger context would take it, and the caller may say how big.
    if (need > 0 && errors.length === overWindow) throw new ContextTooSmallError(errors, need, window);
    throw new UnprocessableEntityError(errors);
  }

  async evaluate(request: EvaluatorRequest, options: EvaluateOptions = {}): Promise<Evaluation> {
    const prepared = this.prepared.get(request) ?? this.prepare(request);
    this.prepared.delete(request);
    const signal = options.signal;
    const results = await this.engine.score(prepared.prefix, prepared.tasks, { shared: prepared.shared, ...(signal ? { signal } : {}) });
    const units: [string, Answer][] = [];
    const masses: [string, number][] = [];
    prepared.questions.forEach((question, i) => {
      const name = prepared.names[i] as string;
      const logprobs = results[i] as number[];
      const p = labelDistribution(logprobs, this.config.temperature);
      units.push([name, kindOf(question).readout(question, p)]);
      masses.push([name, labelMass(logprobs)]);
    });
    return {
      response: {
        model: this.config.id,
        // A question with parts answers with its parts' answers joined.
        answers: joinUnits(request.questions, Object.fromEntries(units)),
        usage: prepared.usage,
      },
      labelMass: Object.fromEntries(masses),
      promptFormat: PROMPT_FORMAT,
    };
  }

  async close(): Promise<void> {
    await this.engine.close();
  }
}

/**
 * Answer positions read for a question: one per distinct label-token prefix
 * (the answer position itself, then each partial label). One for labels that
 * are single tokens.
 */
export function positionsToRead(labels: readonly (readonly Token[])[]): number {
  const prefixes = new Set<string>([""]);
  for (const label of labels) {
    for (let end = 1; end < label.length; end++) prefixes.add(label.slice(0, end).join(","));
  }
  return prefixes.size;
}
