/**
 * Identical requests in one run are sent once: a request already answered is
 * copied from a bounded cache, one still in flight is awaited.
 */
import type { Answer, SystemOneResponse } from "../../api/schema.js";
import type { Outcome } from "../send/send.js";

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

export interface Earlier {
  /** The record whose request was sent. */
  seq: number;
  model: string;
  answers: Record<string, Answer>;
  /** The label mass the answering request reported, so a copy carries it too. */
  label_mass?: Record<string, number>;
}

export class Dedup {
  // Kept as JSON text: a parsed answer graph costs about 7 KB of heap, its text under 1 KB.
  private readonly answered: Lru<string, { seq: number; json: string }>;
  private readonly inFlight = new Map<string, { seq: number; outcome: Promise<Outcome> }>();

  constructor(capacity = 50_000) {
    this.answered = new Lru(capacity);
  }

  /** The answers of an identical request answered earlier in this run, while the cache holds them. */
  earlier(hash: string): Earlier | undefined {
    const hit = this.answered.get(hash);
    if (!hit) return undefined;
    return { seq: hit.seq, ...(JSON.parse(hit.json) as Omit<Earlier, "seq">) };
  }

  /** An identical request still in flight: the record that sent it, and its outcome to come. */
  pending(hash: string): { seq: number; outcome: Promise<Outcome> } | undefined {
    return this.inFlight.get(hash);
  }

  /** Sends through `send` for record `seq` while later identical requests wait on it. */
  async track(hash: string, seq: number, send: () => Promise<Outcome>): Promise<Outcome> {
    const attempt = send();
    this.inFlight.set(hash, { seq, outcome: attempt });
    try {
      return await attempt;
    } finally {
      this.inFlight.delete(hash);
    }
  }

  remember(hash: string, seq: number, response: Pick<SystemOneResponse, "model" | "answers">, labelMass?: Record<string, number>): void {
    this.answered.set(hash, {
      seq,
      json: JSON.stringify({ model: response.model, answers: response.answers, ...(labelMass ? { label_mass: labelMass } : {}) }),
    });
  }
}
