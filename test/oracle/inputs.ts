/**
 * Seeded random input for the differential tests: the same options (seed included) give the
 * same records, on every machine (a pure function: its own PRNG, no `Math.random`, no clock).
 *
 * Event time moves forward by a random step per record; some records are out of order (behind the
 * largest timestamp so far by up to `maxDisorderMs`, meant to stay within grace), some are late
 * (behind by `lateByMs` to `2 * lateByMs`, meant to be past window + grace), and now and then time
 * jumps by `gapMs` (closing sessions and windows). Keys are `k0`..`k{keys-1}`, values `v0`..
 * (strings) or integers, with optional null keys and tombstones (null values).
 */
import type { Datum, InputRecord } from "./kafkaStreams.ts"

/** What to generate; every field but `seed` and `count` has a default. */
export interface GeneratorOptions {
  readonly seed: number
  readonly count: number
  /** The input topic (default `input`). */
  readonly topic?: string
  /** How many distinct keys (default 5). */
  readonly keys?: number
  /** `string` values `v0`..`v{valueCardinality-1}` (default), or `number` values 0..valueCardinality-1. */
  readonly values?: "string" | "number"
  /** How many distinct values (default 10). */
  readonly valueCardinality?: number
  /** Share of records with a null key (default 0). */
  readonly nullKeyRate?: number
  /** Share of records with a null value (default 0). */
  readonly tombstoneRate?: number
  /** Timestamp of the first in-order record (default 0). */
  readonly startMs?: number
  /** Largest forward step of event time per in-order record (default 100; steps are 0..maxStepMs). */
  readonly maxStepMs?: number
  /** Share of out-of-order records (default 0.2). */
  readonly outOfOrderRate?: number
  /** How far behind the largest timestamp an out-of-order record may be (default 500). */
  readonly maxDisorderMs?: number
  /** Share of late records (default 0.02). */
  readonly lateRate?: number
  /** A late record is `lateByMs`..`2 * lateByMs` behind the largest timestamp (default 5000). */
  readonly lateByMs?: number
  /** Share of records after which event time jumps by `gapMs` (default 0.01). */
  readonly gapRate?: number
  /** The size of a jump in event time (default 10000). */
  readonly gapMs?: number
  /** Headers to put on every record (default none). */
  readonly headers?: Readonly<Record<string, string | null>>
}

/** A 32-bit PRNG (mulberry32): `next()` returns a float in [0, 1), the same sequence per seed. */
export const prng = (seed: number): { readonly next: () => number; readonly int: (bound: number) => number } => {
  let state = seed >>> 0
  const next = (): number => {
    state = (state + 0x6D2B79F5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return { next, int: (bound) => Math.floor(next() * bound) }
}

/** `count` input records generated from `options`; the same options give the same records. */
export const generateInputs = (options: GeneratorOptions): ReadonlyArray<InputRecord> => {
  const random = prng(options.seed)
  const topic = options.topic ?? "input"
  const keys = options.keys ?? 5
  const cardinality = options.valueCardinality ?? 10
  const maxStep = options.maxStepMs ?? 100
  const maxDisorder = options.maxDisorderMs ?? 500
  const lateBy = options.lateByMs ?? 5_000
  const outOfOrderRate = options.outOfOrderRate ?? 0.2
  const lateRate = options.lateRate ?? 0.02
  const gapRate = options.gapRate ?? 0.01
  const gap = options.gapMs ?? 10_000
  const records: Array<InputRecord> = []
  let maxTimestamp = options.startMs ?? 0
  for (let i = 0; i < options.count; i++) {
    const roll = random.next()
    let timestamp: number
    if (i > 0 && roll < lateRate) {
      timestamp = Math.max(0, maxTimestamp - lateBy - random.int(lateBy + 1))
    } else if (i > 0 && roll < lateRate + outOfOrderRate) {
      timestamp = Math.max(0, maxTimestamp - 1 - random.int(maxDisorder))
    } else {
      if (i > 0) maxTimestamp += random.int(maxStep + 1)
      timestamp = maxTimestamp
    }
    const key: Datum = random.next() < (options.nullKeyRate ?? 0) ? null : `k${random.int(keys)}`
    const valueNumber = random.int(cardinality)
    const value: Datum = random.next() < (options.tombstoneRate ?? 0)
      ? null
      : options.values === "number" ? valueNumber : `v${valueNumber}`
    records.push(options.headers === undefined ? { topic, key, value, timestamp } : { topic, key, value, timestamp, headers: options.headers })
    if (random.next() < gapRate) maxTimestamp += gap
  }
  return records
}
