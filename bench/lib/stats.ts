/** Small numeric helpers for the benchmark report. */
import { seeded } from "../../test/helpers/seeded.ts"

export const percentile = (sorted: ReadonlyArray<number>, p: number): number => {
  if (sorted.length === 0) return Number.NaN
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[idx] ?? Number.NaN
}

export interface Spread {
  readonly median: number
  readonly min: number
  readonly max: number
  readonly n: number
}

/** Median with min-max over the finite values; undefined when there are none. */
export const spread = (values: ReadonlyArray<number | undefined>): Spread | undefined => {
  const xs = values.filter((v): v is number => v !== undefined && Number.isFinite(v)).sort((a, b) => a - b)
  if (xs.length === 0) return undefined
  const mid = Math.floor(xs.length / 2)
  const median = xs.length % 2 === 1 ? (xs[mid] ?? 0) : ((xs[mid - 1] ?? 0) + (xs[mid] ?? 0)) / 2
  return { median, min: xs[0] ?? 0, max: xs[xs.length - 1] ?? 0, n: xs.length }
}

/** Deterministic PRNG (mulberry32) so every contender gets the same input. */
export const mulberry32 = seeded

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

export const fmtInt = (n: number): string => Math.round(n).toLocaleString("en-US")

export const fmtNum = (n: number, unit: "rec/s" | "ms" | "MiB"): string => {
  if (unit === "rec/s") return fmtInt(n)
  if (unit === "MiB") return n >= 100 ? fmtInt(n) : n.toFixed(1)
  return n >= 100 ? fmtInt(n) : n >= 10 ? n.toFixed(1) : n.toFixed(2)
}
