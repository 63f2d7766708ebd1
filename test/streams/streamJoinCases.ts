/**
 * The stream-stream join cases of the differential tests (issue 32): the
 * oracle's `stream-stream-join`, `-left-join` and `-outer-join` (test/oracle:
 * Kafka Streams' `left` stream joined with the `right` stream within
 * `JoinWindows.ofTimeDifferenceAndGrace(timeDifferenceMs, graceMs)`, and the
 * `-asymmetric` ones with `before`/`after`), value
 * `l+r`, `null` for a missing side), the same joins in Skein, the seeded
 * input both run on, and the deviations of docs/streams.md applied to Kafka
 * Streams' output (`expectedOf`).
 *
 * The input: records of both topics with unique values (`l{i}`, `r{i}`: the
 * input's index), a few keys, timestamps mostly rising, some out of order
 * within grace, some later than grace, and records without a key.
 */
import { Schema } from "effect"
import { JoinWindows, KStream, Topic, Topology } from "../../src/index.ts"
import { prng } from "../oracle/inputs.ts"
import type { InputRecord, OutputRecord } from "../oracle/kafkaStreams.ts"

export const count = 1_000

export interface StreamJoinCase {
  /** The oracle's topology: `stream-stream-{join,left-join,outer-join}`, `-asymmetric` for `before`/`after`. */
  readonly topology: string
  readonly kind: "inner" | "left" | "outer"
  readonly seed: number
  /** A right record joins a left one at `t` when its timestamp is in `[t - beforeMs, t + afterMs]`. */
  readonly beforeMs: number
  readonly afterMs: number
  readonly graceMs: number
  /** The oracle's params. */
  readonly params: Readonly<Record<string, number>>
}

const kinds = [
  { topology: "stream-stream-join", kind: "inner" },
  { topology: "stream-stream-left-join", kind: "left" },
  { topology: "stream-stream-outer-join", kind: "outer" }
] as const

/**
 * Per kind: a symmetric window with grace (`ofTimeDifferenceAndGrace(40, 25)`) and an asymmetric
 * one without (`before(50)`, `after(10)`).
 */
export const cases: ReadonlyArray<StreamJoinCase> = kinds.flatMap((k) => [
  { ...k, seed: 11, beforeMs: 40, afterMs: 40, graceMs: 25, params: { timeDifferenceMs: 40, graceMs: 25 } },
  {
    ...k,
    topology: `${k.topology}-asymmetric`,
    seed: 29,
    beforeMs: 50,
    afterMs: 10,
    graceMs: 0,
    params: { beforeMs: 50, afterMs: 10, graceMs: 0 }
  }
])

/** The case's window as Skein's `JoinWindows`. */
export const windowsOf = (c: StreamJoinCase): JoinWindows.JoinWindows =>
  JoinWindows.ofTimeDifferenceAndGrace(0, c.graceMs).pipe(JoinWindows.before(c.beforeMs), JoinWindows.after(c.afterMs))

/** The input of a case: `count` records of `left` (55%) and `right`. */
export const inputsOf = (c: StreamJoinCase): ReadonlyArray<InputRecord> => {
  const random = prng(c.seed)
  const records: Array<InputRecord> = []
  let time = 10_000
  for (let i = 0; i < count; i++) {
    time += random.int(12)
    const roll = random.next()
    // Out of order within the window plus grace, or later than it, or in order.
    const span = Math.max(c.beforeMs, c.afterMs) + c.graceMs
    const back = roll < 0.3 ? random.int(span + 1) : roll < 0.36 ? span + 1 + random.int(150) : 0
    const left = random.next() < 0.55
    const key = random.next() < 0.02 ? null : `k${random.int(6)}`
    // No record without a value: a Skein stream cannot carry one (its topic's codec refuses a tombstone).
    records.push({ topic: left ? "left" : "right", key, value: `${left ? "l" : "r"}${i}`, timestamp: time - back })
  }
  return records
}

export const Left = Topic.make({ name: "left", key: Schema.String, value: Schema.String })
export const Right = Topic.make({ name: "right", key: Schema.String, value: Schema.String })
export const Output = Topic.make({ name: "output", key: Schema.String, value: Schema.String })

/** The case's join in Skein: `left` joined with `right`, written to `output` (value `l+r`, `null` for a missing side). */
export const topologyOf = (c: StreamJoinCase): Topology.Topology<never, never> => {
  const windows = windowsOf(c)
  const options = { value: Schema.String, otherValue: Schema.String, name: "joined" }
  const left = KStream.from(Left)
  const right = KStream.from(Right)
  const joined = c.kind === "inner"
    ? KStream.windowedJoin(left, right, (l, r) => `${l}+${r}`, windows, options)
    : c.kind === "left"
    ? KStream.windowedLeftJoin(left, right, (l, r) => `${l}+${r ?? "null"}`, windows, options)
    : KStream.windowedOuterJoin(left, right, (l, r) => `${l ?? "null"}+${r ?? "null"}`, windows, options)
  return Topology.make(c.topology, [KStream.to(joined, Output)])
}

/** An output record as compared: key, value, timestamp. */
export interface Result {
  readonly key: string | null
  readonly value: string | null
  readonly timestamp: number
}

/** How many of each deviation `expectedOf` applied to Kafka Streams' output. */
export interface Deviations {
  /** Null results Kafka Streams emitted after a join of a later input than the one closing the window: put where it closed. */
  late: number
  /** Null results Kafka Streams emitted at once, before the window plus grace closed (nothing joined later): put where it closed. */
  early: number
  /** Null results Kafka Streams emitted at once for a record within grace that joined later: removed (it joined). */
  removed: number
  /** Joins Kafka Streams emitted with a record whose null result was out already: removed. */
  joinsAfterNull: number
  /** Null results Kafka Streams never emitted because a join with the record came first, after its window closed: added. */
  added: number
  /** Null results Kafka Streams still held at the end of the input (late), of records it joined with nothing: added. */
  neverEmitted: number
}

/**
 * Kafka Streams' output with the deviations of docs/streams.md applied, and
 * nothing else changed: its joins are kept, in its order, under the input
 * record that made them (the later of the pair), except those with a record
 * whose null result (`l+null`, `null+r`) was out already; each null result
 * is put where the record's window plus grace closed (after the first input
 * that moves stream time past `t + after + grace`, a right record's
 * `t + before + grace`, ordered by
 * timestamp, side (right first), key, arrival, before that input's joins) or
 * at its record when that had closed already; a record within grace that
 * joins before its window closes has no null result. Every null result
 * Kafka Streams emitted must be one of these, or one of those that
 * deviation removes (else it throws): the comparison is not loosened.
 */
export const expectedOf = (
  c: StreamJoinCase,
  inputs: ReadonlyArray<InputRecord>,
  kafkaStreams: ReadonlyArray<OutputRecord>
): { readonly expected: ReadonlyArray<Result>; readonly deviations: Deviations } => {
  const indexOf = new Map<string, number>()
  inputs.forEach((r, i) => {
    if (typeof r.value === "string") indexOf.set(r.value, i)
  })
  const waits = (topic: string) => c.kind === "outer" || (c.kind === "left" && topic === "left")
  // A left record's window ends `after` later, a right record's `before` later.
  const endOf = (i: number) => inputs[i]!.timestamp + (inputs[i]!.topic === "left" ? c.afterMs : c.beforeMs)
  const closeOf = (i: number) => endOf(i) + c.graceMs
  const nullResult = (i: number): Result => {
    const r = inputs[i]!
    return {
      key: r.key === null ? null : String(r.key),
      value: r.topic === "left" ? `${r.value}+null` : `null+${r.value}`,
      timestamp: r.timestamp
    }
  }

  // Kafka Streams' joins by the input that made them; its null results by their record.
  const joinsAt = new Map<number, Array<{ readonly result: Result; readonly other: number }>>()
  const ksNulls = new Map<number, Result>()
  let lastTrigger = -1
  for (const o of kafkaStreams) {
    const [l, r] = String(o.value).split("+")
    const result: Result = { key: o.key === null ? null : String(o.key), value: String(o.value), timestamp: o.timestamp }
    if (l === "null" || r === "null") {
      const i = indexOf.get(l === "null" ? r! : l!)
      if (i === undefined || ksNulls.has(i)) throw new Error(`Kafka Streams emitted an unexpected null result: ${o.value}`)
      ksNulls.set(i, result)
      continue
    }
    const li = indexOf.get(l!)
    const ri = indexOf.get(r!)
    if (li === undefined || ri === undefined) throw new Error(`Kafka Streams emitted an unknown join: ${o.value}`)
    const trigger = Math.max(li, ri)
    if (trigger < lastTrigger) throw new Error(`Kafka Streams' joins are not in input order at ${o.value}`)
    lastTrigger = trigger
    const list = joinsAt.get(trigger) ?? []
    list.push({ result, other: trigger === li ? ri : li })
    joinsAt.set(trigger, list)
  }

  const deviations: Deviations = { late: 0, early: 0, removed: 0, joinsAfterNull: 0, added: 0, neverEmitted: 0 }
  const expected: Array<Result> = []
  // Status per record: 1 waiting for a partner, 2 null result out, 0 otherwise.
  const status = new Map<number, 0 | 1 | 2>()
  const joinedAfterNull = new Set<number>()
  const emitted = new Set<number>()
  const emittedAt = new Map<number, number>()
  let trigger = -1
  const emitNull = (i: number) => {
    emittedAt.set(i, trigger)
    const ks = ksNulls.get(i)
    const result = nullResult(i)
    if (ks === undefined) {
      deviations.added++
    } else if (ks.key !== result.key || ks.timestamp !== result.timestamp || ks.value !== result.value) {
      throw new Error(`Kafka Streams' null result of input ${i} is ${JSON.stringify(ks)}, not ${JSON.stringify(result)}`)
    }
    emitted.add(i)
    expected.push(result)
    status.set(i, 2)
  }
  let streamTime = -1
  const streamTimeAt: Array<number> = []
  inputs.forEach((record, j) => {
    trigger = j
    streamTime = Math.max(streamTime, record.timestamp)
    streamTimeAt.push(streamTime)
    const due = [...status].filter(([i, s]) => s === 1 && closeOf(i) < streamTime).map(([i]) => i)
    due.sort((a, b) => {
      const ra = inputs[a]!
      const rb = inputs[b]!
      return ra.timestamp - rb.timestamp || (ra.topic === "right" ? 0 : 1) - (rb.topic === "right" ? 0 : 1) ||
        Buffer.compare(Buffer.from(String(ra.key)), Buffer.from(String(rb.key))) || a - b
    })
    for (const i of due) emitNull(i)
    if (record.key === null) {
      if (record.value !== null && waits(record.topic)) emitNull(j)
      return
    }
    if (record.value === null) return
    let matched = false
    for (const { other, result } of joinsAt.get(j) ?? []) {
      if (status.get(other) === 2) {
        deviations.joinsAfterNull++
        joinedAfterNull.add(other)
        // An outer join's record whose every join is removed has no partner: it waits for one.
        joinedAfterNull.add(j)
        continue
      }
      expected.push(result)
      matched = true
      if (status.get(other) === 1) status.set(other, 0)
    }
    if (matched || !waits(record.topic)) status.set(j, 0)
    else if (closeOf(j) < streamTime) emitNull(j)
    else status.set(j, 1)
  })

  // Null results Kafka Streams emitted that Skein does not: only a record's own, at once, whose window
  // end had passed (Kafka Streams' rule) but not its grace, and which joined later.
  for (const [i] of ksNulls) {
    if (emitted.has(i)) continue
    const r = inputs[i]!
    const atOnce = (joinsAt.get(i) ?? []).length === 0 && endOf(i) < streamTimeAt[i]!
    if (!atOnce || status.get(i) !== 0) {
      throw new Error(`Kafka Streams emitted a null result for input ${i} (${r.value}) that no deviation explains`)
    }
    deviations.removed++
  }
  // A null result added must be one Kafka Streams pre-empted with a join removed (one after a null result),
  // or one it still held at the end of the input (late: the record joined nothing in Kafka Streams either).
  const inKafkaStreamsJoins = new Set<number>()
  for (const [trigger, list] of joinsAt) {
    for (const { other } of list) {
      inKafkaStreamsJoins.add(trigger)
      inKafkaStreamsJoins.add(other)
    }
  }
  for (const i of emitted) {
    if (ksNulls.has(i) || joinedAfterNull.has(i)) continue
    if (inKafkaStreamsJoins.has(i)) {
      throw new Error(`Skein's null result for input ${i} (${inputs[i]!.value}) has no Kafka Streams counterpart or join after it`)
    }
    deviations.added--
    deviations.neverEmitted++
  }
  // Where Kafka Streams put the null results Skein emits: on time (after every join of an input before the
  // one closing the window, before every join of it and later ones), late, or early, which only its
  // at-once rule explains (a record unmatched on arrival whose window end stream time had passed).
  const joinTriggers: Array<number> = []
  const nullPositions = new Map<number, number>()
  kafkaStreams.forEach((o, n) => {
    const [l, r] = String(o.value).split("+")
    if (l === "null" || r === "null") nullPositions.set(indexOf.get(l === "null" ? r! : l!)!, n)
    else joinTriggers[n] = Math.max(indexOf.get(l!)!, indexOf.get(r!)!)
  })
  for (const [i, n] of nullPositions) {
    const due = emittedAt.get(i)
    if (due === undefined) continue
    const early = joinTriggers.some((t, m) => m > n && t < due)
    const late = joinTriggers.some((t, m) => m < n && t >= due)
    if (early) {
      const r = inputs[i]!
      if ((joinsAt.get(i) ?? []).length > 0 || endOf(i) >= streamTimeAt[i]!) {
        throw new Error(`Kafka Streams emitted the null result of input ${i} (${r.value}) before its window closed`)
      }
      deviations.early++
    }
    if (late) deviations.late++
  }
  return { expected, deviations }
}
