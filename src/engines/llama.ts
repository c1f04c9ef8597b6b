/**
 * The llama.cpp engine (node-llama-cpp, prebuilt CPU binary). One context
 * holds several sequences, each its own KV stream; each request takes a free
 * sequence, evaluates its prefix once, and scores every question's suffix
 * after it, erasing the suffix back to the prefix between questions.
 * Concurrent requests take turns chunk by chunk, so a short request is not
 * stuck behind a long one.
 *
 * Reuse across requests: a sequence keeps the prefix of its last request, and
 * the next request on it evaluates only the decodes after the last one whose
 * tokens (and all before it) are unchanged. The prefix is always cut at the
 * end of the shared system text, so that text goes through the same decodes
 * in every request and its cached KV holds the bits a cold run computes.
 *
 * Determinism: llama.cpp's logits depend slightly (about 1e-6 relative) on how
 * a sequence's tokens are split into micro-batches, which it decides from
 * everything in the batch, and a one-token decode takes a different kernel
 * path than a batch of rows. So each decode holds one chunk of one sequence
 * (a lock serialises them), chunks depend only on the token count, and no
 * chunk is a single token: the same request gives the same bits whatever else
 * runs. Batching several sequences into one decode measured no faster on a
 * 2-core CPU (11.4 s vs 10.6 s for 16 questions), so nothing is lost.
 */
import { availableParallelism } from "node:os";
import {
  getLlama,
  LlamaLogLevel,
  type ControlledEvaluateInputItem,
  type ControlledEvaluateIndexOutput,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  type Token as LlamaToken,
} from "node-llama-cpp";
import { format } from "node:util";
import type { Engine, EngineStats, ScoreOptions, ScoreTask, Token } from "./engine.js";
import { InvocationError } from "../api/errors.js";
import { env, GPU_BACKENDS } from "../api/env.js";
import { createLogger, type Logger } from "../logging/logger.js";

/** Which llama.cpp backend to load: a GPU one by name, the best available ("auto", falling back to the CPU), or the CPU ("off"). */
export const GPU_CHOICES = GPU_BACKENDS;
export type GpuChoice = (typeof GPU_CHOICES)[number];

/** An explicitly named backend that cannot be loaded here. */
export class BackendError extends InvocationError {
  override name = "BackendError";
}

/** The llama.cpp backend a choice gives on this machine: "cpu" or the GPU backend's name. */
export async function probeBackend(gpu: GpuChoice): Promise<string> {
  const llama = await sharedLlama(gpu, 1);
  return llama.gpu === false ? "cpu" : llama.gpu;
}

let nativeLogger: Logger | undefined;

/**
 * llama.cpp's own lines (`llama_model_load: error loading model ...`) and
 * node-llama-cpp's notices (`A prebuilt binary was not found`) go to the
 * debug log: a failure is told once, by the one line of the error the
 * command ends with, never after a native preamble.
 */
function logNative(level: LlamaLogLevel | "notice", message: string): void {
  nativeLogger ??= createLogger({ level: env("TYPED_EVAL_LOG_LEVEL") });
  nativeLogger.debug({ llama: level }, message.trimEnd());
}

/** Runs `load` with node-llama-cpp's console notices (printed while it picks a binary, some whatever its options) sent to the debug log. */
async function withNoticesLogged<T>(load: () => Promise<T>): Promise<T> {
  const methods = ["log", "info", "warn", "error"] as const;
  const saved = methods.map((m) => console[m]);
  for (const [i, m] of methods.entries()) {
    const original = saved[i] as (...args: unknown[]) => void;
    console[m] = (...args: unknown[]) => {
      if (typeof args[0] === "string" && args[0].includes("node-llama-cpp")) logNative("notice", format(...args));
      else original(...args);
    };
  }
  try {
    return await load();
  } finally {
    for (const [i, m] of methods.entries()) console[m] = saved[i] as (typeof console)[typeof m];
  }
}

/**
 * One llama.cpp binding per backend choice and thread count for the life of the process, never
 * disposed (it holds nothing that keeps the process alive; models and contexts are disposed with
 * their engine). On Linux getLlama first loads the prebuilt binary in a child process to check it
 * (0.3-0.6 s on 2 cores): a server with several models, or a process running several commands
 * (the tests run hundreds in process), pays that once instead of at every load.
 */
const llamas = new Map<string, Promise<Llama>>();

function sharedLlama(gpu: GpuChoice, threads: number): Promise<Llama> {
  const key = `${gpu}/${threads}`;
  let llama = llamas.get(key);
  if (llama === undefined) {
    llama = loadLlama(gpu, threads);
    llamas.set(key, llama);
    // A backend that failed to load is tried again next time, not remembered as failed.
    llama.catch(() => llamas.delete(key));
  }
  return llama;
}

async function loadLlama(gpu: GpuChoice, threads: number): Promise<Llama> {
  try {
    return await withNoticesLogged(() =>
      getLlama({
        gpu: gpu === "off" ? false : gpu,
        build: "never",
        maxThreads: threads,
        logLevel: LlamaLogLevel.warn,
        logger: logNative,
        progressLogs: false,
      }),
    );
  } catch (error) {
    throw new BackendError(
      `--gpu ${gpu}: no ${gpu.toUpperCase()} build of llama.cpp can be loaded here (${(error as Error).name}: ${(error as Error).message.slice(0, 160)}). ` +
        `Install it as docs/models.md says (GPU), or use --gpu auto, which falls back to the CPU.`,
    );
  }
}

/**
 * The smallest context llama.cpp makes, and the step it rounds every size up
 * to (node-llama-cpp's `contextSizePad`, from `GGML_PAD` in llama.cpp's
 * context): a smaller `contextSize` would be raised to it without a word.
 */
export const CONTEXT_STEP = 256;

/** The context size llama.cpp makes for a request of `tokens`: a whole number of steps. */
export function contextSizeFor(tokens: number): number {
  return Math.max(CONTEXT_STEP, Math.ceil(tokens / CONTEXT_STEP) * CONTEXT_STEP);
}

export interface LlamaEngineOptions {
  modelPath: string;
  /** llama.cpp backend; default "auto" (a GPU when a GPU build loads, else the CPU). */
  gpu?: GpuChoice;
  /** Tokens each sequence can hold; default: the model's training context, at most 8,192. */
  contextSize?: number;
  /** Requests in progress at once (context sequences); more wait in a FIFO. Default 4. */
  sequences?: number;
  /** CPU threads; default `TYPED_EVAL_THREADS`, else every core (more threads than cores slows llama.cpp badly). */
  threads?: number;
  /** Largest slice of tokens fed to one decode. Default 512 (node-llama-cpp's own batch size). */
  chunkTokens?: number;
  /** Keep each sequence's prefix between requests and evaluate only what changed. Default true (always off for sliding-window models); the answers are the same bits either way. */
  reuse?: boolean;
}

/** The generateNext options that read exact log-probabilities of `tokens` at one position. */
function readLogprobs(tokens: readonly Token[]) {
  return {
    generateNext: {
      // includeTop: 1 brings the max logit; totalLogitWeight = sum exp(logit - max) over the whole vocabulary.
      logits: { filter: { tokens: tokens as LlamaToken[], includeTop: 1 } },
      totalLogitWeight: true,
      options: { temperature: 0 },
    },
  } as const;
}

/** log P(token) for each of `tokens`, from a filtered-logits output. */
function logprobsFrom(output: ControlledEvaluateIndexOutput | undefined, tokens: readonly Token[]): number[] {
  const logits = output?.next.logits;
  const total = output?.next.totalLogitWeight;
  if (!logits || total === undefined) throw new Error("llama.cpp returned no logits for the answer position");
  const first = logits.values().next();
  const max = first.done ? 0 : first.value;
  const logTotal = Math.log(total);
  return tokens.map((t) => {
    const logit = logits.get(t as LlamaToken);
    return logit === undefined ? -Infinity : logit - max - logTotal;
  });
}

/**
 * Sizes of the chunks `count` tokens are fed in: at most `chunk` each (the
 * first at most `first`), and never a lone last token (a one-row decode
 * rounds differently).
 */
export function chunkSizes(count: number, chunk: number, first = chunk): number[] {
  // A lone last token borrows one from the chunk before: with chunks of two that one would be left alone.
  if (chunk < 3) throw new RangeError("chunks must hold at least three tokens");
  const sizes: number[] = [];
  for (let left = count, size = first; left > 0; left -= size, size = chunk) sizes.push(Math.min(size, left));
  const n = sizes.length;
  if (n >= 2 && sizes[n - 1] === 1) {
    sizes[n - 2]! -= 1;
    sizes[n - 1] = 2;
  }
  return sizes;
}

/**
 * The decodes a prefix goes through: the shared part in chunks of its own,
 * then the rest cut at multiples of `chunk` counted from the prefix's start
 * (the first piece runs up to the next multiple). Fixed by the lengths alone,
 * so a kept decode is one a cold run would make. No decode holds a single
 * token, but for a part that is one token long (a one-token shared part, or
 * one token after it), which the evaluator's prompts never have.
 *
 * Why multiples: a decode's attention spans the cache up to its last token,
 * rounded up to a whole block of cells (the timings fit blocks of 256), so a
 * chunk that ends just past a block boundary pays for most of a block it
 * does not use. With the default 512 every cut after the first falls on a
 * boundary; a `chunkTokens` that is not a multiple of 256 gets less of this.
 * Measured with bench/engine-ab.ts on the 0.5B-shaped model, 2,092-token
 * state: 5.7-6.8% less time for the state than chunks counted from the end
 * of the system text (answers differ from those by about 1e-6, as any other
 * cut would; states under `chunk` minus the system text are cut as before).
 */
export function prefixChunks(length: number, shared: number, chunk: number): number[] {
  const head = Math.max(0, Math.min(shared, length));
  const rest = length - head;
  const aligned = chunkSizes(rest, chunk, chunk - (head % chunk));
  // A first piece of one token (or two, one of them borrowed by a lone last token): cut the rest as it comes.
  return [...chunkSizes(head, chunk), ...(aligned.every((size) => size >= 2) ? aligned : chunkSizes(rest, chunk))];
}

/** What a sequence holds from its last request: the prefix and the sizes of the decodes it went through. */
interface Held {
  tokens: readonly Token[];
  chunks: readonly number[];
}

/** Leading tokens of `held` a request for `prefix` in `chunks` can keep: whole decodes, identical in tokens and cut. */
export function keptTokens(held: Held | undefined, prefix: readonly Token[], chunks: readonly number[]): number {
  if (!held) return 0;
  let kept = 0;
  for (let i = 0; i < chunks.length && i < held.chunks.length && chunks[i] === held.chunks[i]; i++) {
    const end = kept + (chunks[i] as number);
    for (let t = kept; t < end; t++) if (held.tokens[t] !== prefix[t]) return kept;
    kept = end;
  }
  return kept;
}

/** A FIFO of free sequences; requests wait their turn. */
class SequencePool {
  private readonly free: LlamaContextSequence[];
  private readonly waiting: ((sequence: LlamaContextSequence) => void)[] = [];
  active = 0;

  constructor(sequences: LlamaContextSequence[]) {
    this.free = sequences;
  }

  get queued(): number {
    return this.waiting.length;
  }

  /**
   * A free sequence (the one `worth` values most; on a tie the one released
   * longest ago, so the prefixes of other question sets live longest), else
   * the next to be released.
   */
  async acquire(signal: AbortSignal | undefined, worth: (sequence: LlamaContextSequence) => number): Promise<LlamaContextSequence> {
    signal?.throwIfAborted();
    if (this.free.length > 0) {
      // `free` is in release order: index 0 was released first.
      let best = 0;
      let bestWorth = worth(this.free[0] as LlamaContextSequence);
      for (let i = 1; i < this.free.length; i++) {
        const w = worth(this.free[i] as LlamaContextSequence);
        if (w > bestWorth) [best, bestWorth] = [i, w];
      }
      this.active++;
      return this.free.splice(best, 1)[0] as LlamaContextSequence;
    }
    return new Promise((resolve, reject) => {
      const grant = (sequence: LlamaContextSequence) => {
        signal?.removeEventListener("abort", onAbort);
        this.active++;
        resolve(sequence);
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(grant);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(grant);
    });
  }

  release(sequence: LlamaContextSequence): void {
    this.active--;
    const next = this.waiting.shift();
    if (next) next(sequence);
    else this.free.push(sequence);
  }
}

export class LlamaEngine implements Engine {
  /** Serialises decodes: one chunk of one sequence per llama_decode (see the file comment). */
  private decoding: Promise<unknown> = Promise.resolve();
  /** Each sequence's prefix from its last completed request; absent when it holds nothing reusable. */
  private readonly held = new Map<LlamaContextSequence, Held>();
  private evaluated = 0;
  /** `maxTokenBytes`, once read (null: not yet). */
  private longestToken: number | undefined | null = null;

  private constructor(
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly pool: SequencePool,
    private readonly chunkTokens: number,
    /** Whether sequences keep their prefix between requests. */
    readonly reuse: boolean,
  ) {}

  /** Loads a GGUF model with a prebuilt llama.cpp binary (never building from source), on the backend `gpu` chooses. */
  static async load(options: LlamaEngineOptions): Promise<LlamaEngine> {
    // Refused, not raised: a run told 64 would otherwise hold 256 and fail every record it thought would fit.
    if (options.contextSize !== undefined && options.contextSize < CONTEXT_STEP)
      throw new InvocationError(
        `--context-size ${options.contextSize} is below the smallest context llama.cpp makes (${CONTEXT_STEP} tokens); pass ${CONTEXT_STEP} or more`,
      );
    const threads = options.threads ?? env("TYPED_EVAL_THREADS") ?? availableParallelism();
    const sequences = options.sequences ?? 4;
    const chunkTokens = options.chunkTokens ?? 512;
    const llama = await sharedLlama(options.gpu ?? "auto", threads);
    // On a GPU backend every layer that fits is offloaded; on the CPU none.
    let model: LlamaModel;
    try {
      model = await llama.loadModel({ modelPath: options.modelPath, gpuLayers: llama.gpu === false ? 0 : "auto" });
    } catch (error) {
      // llama.cpp's own lines about the failure come through the event loop, and can trail the rejection: let them reach the debug log first.
      await new Promise((resolve) => setTimeout(resolve, 20));
      throw error;
    }
    const trained = model.trainContextSize;
    const contextSize = options.contextSize ?? Math.min(trained, 8192);
    const context = await model.createContext({
      contextSize,
      sequences,
      threads: { ideal: threads, min: threads },
      batchSize: chunkTokens,
      // Flash attention changes the summation order with the KV layout; keep the plain path.
      flashAttention: false,
    });
    const all = Array.from({ length: sequences }, () => context.getSequence());
    // A sliding-window cache drops a long sequence's first cells, and erasing back into them makes
    // node-llama-cpp re-evaluate the rest in batches of its own choosing: no reuse on such models.
    const slidingWindow = (model.fileInsights.swaSize ?? 0) > 0;
    return new LlamaEngine(llama, model, context, new SequencePool(all), chunkTokens, (options.reuse ?? true) && !slidingWindow);
  }

  /** The backend this engine runs on: "cpu", "cuda", "vulkan" or "metal". */
  get backend(): string {
    return this.llama.gpu === false ? "cpu" : this.llama.gpu;
  }

  get contextSize(): number {
    return this.context.contextSize;
  }

  /** The GGUF's `general.name`, when it has one. */
  get modelName(): string | undefined {
    const name = this.model.fileInfo.metadata.general?.name;
    return typeof name === "string" && name.trim() !== "" ? name.trim() : undefined;
  }

  get chatTemplate(): string | undefined {
    const template = this.model.fileInfo.metadata.tokenizer?.chat_template;
    return typeof template === "string" ? template : undefined;
  }

  /**
   * The longest token's text as the GGUF stores it, in UTF-8 bytes: never
   * fewer than the bytes the token stands for (a byte-level BPE stores each
   * byte as one character, SentencePiece a space as three bytes, byte
   * fallback one byte as six). Read once, on first use (about 10 ms for a
   * 150,000-token vocabulary).
   */
  maxTokenBytes(): number | undefined {
    if (this.longestToken === null) {
      const tokens = (this.model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: unknown } } }).tokenizer?.ggml?.tokens;
      let most = 0;
      if (Array.isArray(tokens)) for (const token of tokens) if (typeof token === "string") most = Math.max(most, Buffer.byteLength(token));
      this.longestToken = most > 0 ? most : undefined;
    }
    return this.longestToken;
  }

  tokenize(text: string, special: boolean): Token[] {
    return this.model.tokenize(text, special);
  }

  stats(): EngineStats {
    return { queued: this.pool.queued, active: this.pool.active };
  }

  /** Tokens fed to llama.cpp since load (prefixes kept from earlier requests are not fed again). */
  get evaluatedTokens(): number {
    return this.evaluated;
  }

  /** Runs one controlledEvaluate while no other sequence decodes. */
  private decode(sequence: LlamaContextSequence, items: ControlledEvaluateInputItem[]): ReturnType<LlamaContextSequence["controlledEvaluate"]> {
    this.evaluated += items.length;
    const run = this.decoding.then(() => sequence.controlledEvaluate(items));
    this.decoding = run.catch(() => undefined);
    return run;
  }

  async score(prefix: readonly Token[], tasks: readonly ScoreTask[], options: ScoreOptions = {}): Promise<number[][]> {
    const { signal } = options;
    const chunks = prefixChunks(prefix.length, options.shared ?? 0, this.chunkTokens);
    const sequence = await this.pool.acquire(signal, (s) => (this.reuse ? keptTokens(this.held.get(s), prefix, chunks) : 0));
    // Until the request completes, what the sequence holds is not a known prefix.
    const held = this.held.get(sequence);
    this.held.delete(sequence);
    try {
      const kept = this.reuse && sequence.nextTokenIndex === held?.tokens.length ? keptTokens(held, prefix, chunks) : 0;
      if (kept === 0) await sequence.clearHistory();
      else await sequence.eraseContextTokenRanges([{ start: kept, end: sequence.nextTokenIndex }]);
      let done = 0;
      const todo: number[] = [];
      for (const size of chunks) {
        if (done >= kept) todo.push(size);
        done += size;
      }
      await this.feed(sequence, prefix.slice(kept), signal, todo);
      const results: number[][] = [];
      for (const task of tasks) {
        signal?.throwIfAborted();
        results.push(await this.scoreTask(sequence, task, signal));
        await sequence.eraseContextTokenRanges([{ start: prefix.length, end: sequence.nextTokenIndex }]);
      }
      if (sequence.nextTokenIndex === prefix.length) this.held.set(sequence, { tokens: prefix.slice(), chunks });
      return results;
    } finally {
      this.pool.release(sequence);
    }
  }

  /** Evaluates `tokens` in fixed chunks (`sizes`, default counted from its start); the last token may carry output options. */
  private async feed(
    sequence: LlamaContextSequence,
    tokens: readonly Token[],
    signal: AbortSignal | undefined,
    sizes: readonly number[] = chunkSizes(tokens.length, this.chunkTokens),
    last?: ReturnType<typeof readLogprobs>,
  ): Promise<ControlledEvaluateIndexOutput | undefined> {
    let output: ControlledEvaluateIndexOutput | undefined;
    let start = 0;
    for (const size of sizes) {
      signal?.throwIfAborted();
      const chunk: ControlledEvaluateInputItem[] = tokens.slice(start, start + size) as LlamaToken[];
      start += size;
      const isLast = start === tokens.length;
      if (isLast && last) chunk[size - 1] = [chunk[size - 1] as LlamaToken, last];
      const outputs = await this.decode(sequence, chunk);
      if (isLast) output = outputs[size - 1];
    }
    return output;
  }

  /**
   * Label log-probabilities after one suffix. Distinct single-token labels
   * are read at the suffix's last position. Otherwise each label is scored
   * whole: the suffix's last token and the label's tokens go in one batch
   * that reads every label position, then are erased for the next label.
   */
  private async scoreTask(sequence: LlamaContextSequence, task: ScoreTask, signal: AbortSignal | undefined): Promise<number[]> {
    const { suffix, labels } = task;
    if (suffix.length < 2) throw new Error("a question's suffix must hold at least two tokens");
    const firsts = labels.map((l) => l[0] as Token);
    if (labels.every((l) => l.length === 1) && new Set(firsts).size === labels.length) {
      return logprobsFrom(await this.feed(sequence, suffix, signal, undefined, readLogprobs(firsts)), firsts);
    }
    const body = suffix.slice(0, -1);
    await this.feed(sequence, body, signal);
    const lastToken = suffix[suffix.length - 1] as LlamaToken;
    const out: number[] = [];
    for (const label of labels) {
      signal?.throwIfAborted();
      const items: ControlledEvaluateInputItem[] = [lastToken, ...(label.slice(0, -1) as LlamaToken[])].map((token, i) => [
        token,
        readLogprobs([label[i] as Token]),
      ]);
      const outputs = await this.decode(sequence, items);
      let logprob = 0;
      label.forEach((token, i) => (logprob += logprobsFrom(outputs[i], [token])[0] as number));
      out.push(logprob);
      await sequence.eraseContextTokenRanges([{ start: sequence.nextTokenIndex - items.length, end: sequence.nextTokenIndex }]);
    }
    return out;
  }

  private closed = false;

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.context.dispose();
    await this.model.dispose();
  }
}
