/**
 * Identical requests in one run are sent once: a request already answered is
 * copied from a bounded cache, one still in flight is awaited. Copies name
 * the original record by its id (`dedup_of`) and carry its label mass.
 */
import type { Outcome } from "../send/send.js";
import { readJournal } from "./journal.js";

/** A bounded map that forgets the least recently used entries. */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly capacity: number) {}
  get(key: K): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }
  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as K);
  }
  get size(): number {
    return this.map.size;
  }
}

/** A record's outcome, and the id of the record whose identical request was sent when it is a copy. */
export interface Answered {
  outcome: Outcome;
  /** Set when the outcome is another record's (the request was not sent for this one). */
  copyOf?: string;
}

const ZERO = { input_tokens: 0, output_tokens: 0 };

export class Dedup {
  // Kept as JSON text: a parsed answer graph costs about 7 KB of heap, its text under 1 KB.
  private readonly answered: Lru<string, { id: string; json: string }>;
  private readonly inFlight = new Map<string, { id: string; outcome: Promise<Outcome> }>();

  constructor(capacity = 50_000) {
    this.answered = new Lru(capacity);
  }

  /**
   * Answers record `id` once per identical request (`hash`): a copy of an
   * earlier answer while the cache holds it (label mass included), else the
   * outcome of an identical request in flight, else `send()`. Everything up
   * to the send happens synchronously, and a success enters the cache before
   * it leaves the in-flight map, so an identical request arriving at any
   * moment finds its twin in one or the other: never sent twice. `send` may
   * throw synchronously (nothing is then registered). Copies carry zero usage.
   */
  answer(hash: string, id: string, send: () => Promise<Outcome>): Promise<Answered> {
    const hit = this.answered.get(hash);
    if (hit) {
      const evaluation = JSON.parse(hit.json) as Extract<Outcome, { ok: true }>["evaluation"];
      return Promise.resolve({ outcome: { ok: true, evaluation }, copyOf: hit.id });
    }
    const pending = this.inFlight.get(hash);
    if (pending) return pending.outcome.then((outcome) => ({ outcome: copied(outcome), copyOf: pending.id }));
    const outcome = send().then((result) => {
      if (result.ok) this.remember(hash, id, result);
      return result;
    });
    this.inFlight.set(hash, { id, outcome });
    const forget = () => {
      this.inFlight.delete(hash);
    };
    outcome.then(forget, forget);
    return outcome.then((result) => ({ outcome: result }));
  }

  /**
   * Fills the cache from a journal being resumed: the answers sent by earlier
   * runs (copies skipped), latest last, so a record whose twin finished before
   * the crash is a copy of it, as in a run that never stopped (the output is
   * then the same file). Keyed like `answer`, by the journal's hash prefix.
   */
  async prime(journalPath: string): Promise<void> {
    for await (const entry of readJournal(journalPath)) {
      if (entry.k !== "answer" || entry.dedup_of !== undefined) continue;
      const evaluation = {
        response: { model: entry.model, answers: entry.answers, usage: entry.usage },
        ...(entry.label_mass ? { labelMass: entry.label_mass } : {}),
      };
      this.remember(entry.h, entry.id, { ok: true, evaluation });
    }
  }

  private remember(hash: string, id: string, { evaluation }: Extract<Outcome, { ok: true }>): void {
    const { model, answers } = evaluation.response;
    const copy = { response: { model, answers, usage: ZERO }, ...(evaluation.labelMass ? { labelMass: evaluation.labelMass } : {}) };
    this.answered.set(hash, { id, json: JSON.stringify(copy) });
  }
}

/** Another record's outcome as a copy: the same answers, no usage of its own. */
function copied(outcome: Outcome): Outcome {
  if (!outcome.ok) return outcome;
  return { ok: true, evaluation: { ...outcome.evaluation, response: { ...outcome.evaluation.response, usage: ZERO } } };
}
