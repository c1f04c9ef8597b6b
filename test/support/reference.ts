/**
 * An independent readout for tests: evaluates a whole token sequence on a
 * fresh sequence, in the batches it is told, and sums the log-probabilities of
 * its last tokens read from the engine's full next-token distribution
 * (`probabilities: true`): no prefix reuse, no filtered logits.
 */
import { getLlama, LlamaLogLevel, type LlamaContext, type LlamaModel, type Token } from "node-llama-cpp";

type Items = Parameters<import("node-llama-cpp").LlamaContextSequence["controlledEvaluate"]>[0];

export class ReferenceModel {
  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly sequence = context.getSequence(),
  ) {}

  static async load(modelPath: string, contextSize = 8192): Promise<ReferenceModel> {
    const llama = await getLlama({ gpu: false, build: "never", maxThreads: 1, logLevel: LlamaLogLevel.error });
    const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
    const context = await model.createContext({ contextSize, sequences: 1, threads: 1, batchSize: 512, flashAttention: false });
    return new ReferenceModel(model, context);
  }

  /**
   * log P(last `labelLength` tokens | the tokens before them), evaluating
   * `tokens` in batches of the given sizes (default: one batch).
   */
  async logprob(tokens: readonly number[], labelLength: number, batches: readonly number[] = [tokens.length]): Promise<number> {
    if (batches.reduce((a, b) => a + b, 0) !== tokens.length) throw new Error("batches must cover the tokens");
    const firstRead = tokens.length - labelLength - 1;
    const sequence = this.sequence;
    await sequence.clearHistory();
    let logprob = 0;
    let start = 0;
    for (const size of batches) {
      const items = tokens
        .slice(start, start + size)
        .map((t, i) =>
          start + i >= firstRead && start + i < tokens.length - 1
            ? [t as Token, { generateNext: { probabilities: true, options: { temperature: 0 } } }]
            : (t as Token),
        );
      const outputs = await sequence.controlledEvaluate(items as Items);
      outputs.forEach((output, i) => {
        const next = tokens[start + i + 1];
        if (output && next !== undefined) logprob += Math.log(output.next.probabilities?.get(next as Token) ?? 0);
      });
      start += size;
    }
    return logprob;
  }

  async close(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
  }
}
