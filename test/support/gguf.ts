/**
 * A GGUF v3 writer for models the tests and benchmarks make themselves (no
 * model hub is reachable here). Random weights with a real model's shapes cost
 * exactly what trained ones cost: honest speed figures, never quality figures.
 */
import { closeSync, openSync, writeSync } from "node:fs";

const ALIGNMENT = 32;

enum ValueType {
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
}

export type MetaValue = { u32: number } | { f32: number } | { bool: boolean } | { str: string } | { strs: readonly string[] } | { i32s: readonly number[] };

export type TensorType = "f32" | "q4_0";

export interface TensorSpec {
  name: string;
  /** ggml order: ne0 (the contiguous dimension) first. */
  dims: readonly number[];
  type: TensorType;
  /** Fills `out` with the tensor's bytes starting at byte `offset` of the tensor. */
  fill(out: Uint8Array, offset: number): void;
}

const TYPE_ID: Record<TensorType, number> = { f32: 0, q4_0: 2 };

export function tensorBytes(type: TensorType, dims: readonly number[]): number {
  const count = dims.reduce((a, b) => a * b, 1);
  if (type === "f32") return count * 4;
  if ((dims[0] ?? 0) % 32 !== 0) throw new Error(`q4_0 needs ne0 divisible by 32, got ${dims[0]}`);
  return (count / 32) * 18;
}

class ByteSink {
  private chunks: Buffer[] = [];
  length = 0;
  push(buffer: Buffer): void {
    this.chunks.push(buffer);
    this.length += buffer.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  i32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.push(b);
  }
  u64(v: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  str(s: string): void {
    const bytes = Buffer.from(s, "utf8");
    this.u64(bytes.length);
    this.push(bytes);
  }
  pad(): void {
    const rest = this.length % ALIGNMENT;
    if (rest) this.push(Buffer.alloc(ALIGNMENT - rest));
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

function writeValue(sink: ByteSink, value: MetaValue): void {
  if ("u32" in value) {
    sink.u32(ValueType.UINT32);
    sink.u32(value.u32);
  } else if ("f32" in value) {
    sink.u32(ValueType.FLOAT32);
    sink.f32(value.f32);
  } else if ("bool" in value) {
    sink.u32(ValueType.BOOL);
    sink.push(Buffer.from([value.bool ? 1 : 0]));
  } else if ("str" in value) {
    sink.u32(ValueType.STRING);
    sink.str(value.str);
  } else if ("strs" in value) {
    sink.u32(ValueType.ARRAY);
    sink.u32(ValueType.STRING);
    sink.u64(value.strs.length);
    for (const s of value.strs) sink.str(s);
  } else {
    sink.u32(ValueType.ARRAY);
    sink.u32(ValueType.INT32);
    sink.u64(value.i32s.length);
    for (const v of value.i32s) sink.i32(v);
  }
}

/** Writes a GGUF v3 file, streaming tensor data in chunks so large models never sit in memory. */
export function writeGguf(path: string, metadata: Record<string, MetaValue>, tensors: readonly TensorSpec[]): void {
  const head = new ByteSink();
  head.push(Buffer.from("GGUF", "ascii"));
  head.u32(3);
  head.u64(tensors.length);
  head.u64(Object.keys(metadata).length);
  for (const [key, value] of Object.entries(metadata)) {
    head.str(key);
    writeValue(head, value);
  }
  let offset = 0;
  const offsets: number[] = [];
  for (const t of tensors) {
    head.str(t.name);
    head.u32(t.dims.length);
    for (const d of t.dims) head.u64(d);
    head.u32(TYPE_ID[t.type]);
    head.u64(offset);
    offsets.push(offset);
    offset += Math.ceil(tensorBytes(t.type, t.dims) / ALIGNMENT) * ALIGNMENT;
  }
  head.pad();
  const fd = openSync(path, "w");
  try {
    writeSync(fd, head.toBuffer());
    // A whole number of q4_0 blocks (18 bytes) and of f32 values (4 bytes).
    const chunk = new Uint8Array(18 * (1 << 18));
    for (const t of tensors) {
      const size = tensorBytes(t.type, t.dims);
      for (let done = 0; done < size; done += chunk.length) {
        const piece = chunk.subarray(0, Math.min(chunk.length, size - done));
        t.fill(piece, done);
        writeSync(fd, piece);
      }
      const padding = Math.ceil(size / ALIGNMENT) * ALIGNMENT - size;
      if (padding) writeSync(fd, new Uint8Array(padding));
    }
  } finally {
    closeSync(fd);
  }
}

/** A seeded xorshift32 generator: the same seed writes the same model. */
export function xorshift(seed: number): () => number {
  let x = seed >>> 0 || 0x9e3779b9;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

/** f32 data: uniform in [-scale, scale), or the constant `scale` when `constant` is set. */
export function f32Fill(seed: number, scale: number, constant = false): TensorSpec["fill"] {
  return (out, offset) => {
    const next = xorshift(seed + offset);
    const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
    for (let i = 0; i + 4 <= out.length; i += 4) {
      const v = constant ? scale : ((next() / 0x100000000) * 2 - 1) * scale;
      view.setFloat32(i, v, true);
    }
  };
}

/** IEEE half-precision bits of a number (round to nearest, normal range only). */
export function toF16Bits(value: number): number {
  const f32 = new Float32Array([value]);
  const bits = new Uint32Array(f32.buffer)[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  const mantissa = bits & 0x7fffff;
  if (exponent <= 0) return sign;
  if (exponent >= 31) return sign | 0x7c00;
  return sign | (exponent << 10) | Math.round(mantissa / 0x2000);
}

/** q4_0 data: blocks of 32 weights, an f16 scale then 16 bytes of random 4-bit values. */
export function q4Fill(seed: number, scale: number): TensorSpec["fill"] {
  const d = toF16Bits(scale);
  return (out, offset) => {
    if (offset % 18 !== 0 || out.length % 18 !== 0) throw new Error("q4_0 chunks must hold whole blocks");
    const next = xorshift(seed + offset);
    for (let b = 0; b < out.length; b += 18) {
      out[b] = d & 0xff;
      out[b + 1] = d >>> 8;
      for (let i = 2; i < 18; i += 4) {
        const r = next();
        out[b + i] = r & 0xff;
        out[b + i + 1] = (r >>> 8) & 0xff;
        out[b + i + 2] = (r >>> 16) & 0xff;
        out[b + i + 3] = r >>> 24;
      }
    }
  };
}
