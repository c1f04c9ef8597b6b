/**
 * The narrow interface between the evaluator and a language-model back end:
 * tokenize, evaluate a shared prefix once, and score label token sequences
 * after each suffix. Nothing here knows about questions or prompts.
 */
export type Token = number;

/** One question's work: its suffix after the shared prefix, and the label sequences to score after it. */
export interface ScoreTask {
  suffix: readonly Token[];
  /** Each label's whole token sequence; its log-probability is the sum over its tokens. */
  labels: readonly (readonly Token[])[];
}

export interface EngineStats {
  /** Requests waiting for a free sequence. */
  queued: number;
  /** Requests being evaluated. */
  active: number;
}

/** How `score` may go about a request. */
export interface ScoreOptions {
  signal?: AbortSignal;
  /**
   * Leading tokens of the prefix that many requests share (the system text).
   * They are evaluated in decodes of their own, so an engine can keep them
   * cached between requests and still give the same bits as a cold run.
   */
  shared?: number;
}

export interface Engine {
  /** Context window of the loaded model, in tokens. */
  readonly contextSize: number;
  /** The model's own chat template (GGUF `tokenizer.chat_template`), if it has one. */
  readonly chatTemplate: string | undefined;
  /** Tokens of `text`. Control tokens (e.g. `<|im_end|>`) are parsed only when `special` is true. */
  tokenize(text: string, special: boolean): Token[];
  /**
   * Evaluates `prefix` once (or keeps what a sequence already holds of it),
   * then each task's suffix after it. Per task, in order: log P(label
   * sequence | prefix + suffix) for each label, under the model's full
   * next-token distributions.
   */
  score(prefix: readonly Token[], tasks: readonly ScoreTask[], options?: ScoreOptions): Promise<number[][]>;
  /**
   * At least as many UTF-8 bytes as any one token stands for (undefined:
   * unknown), so a text's byte length over it bounds its token count from
   * below without tokenizing it.
   */
  maxTokenBytes?(): number | undefined;
  stats(): EngineStats;
  close(): Promise<void>;
}
