/**
 * The verifier. It shares no code path with the runtime: topics are read
 * with the raw reader of `wire.ts`, which resolves transactions from the
 * log's own commit/abort markers, and the expected outputs are recomputed
 * from the input topic (the record of truth).
 *
 * Before checking, `awaitQuiescence` waits until every consumer group is
 * empty and no transaction is open on any output partition (last stable
 * offset == high watermark), as Kafka's streams_eos_test does.
 *
 * Checks, per key (records of a key are in one input partition, in order):
 * - echo: the output sequence of the key equals its input sequence exactly
 *   (no duplicate, no loss, order preserved);
 * - aggregate: the key's outputs are exactly the running count/sum/min/max
 *   after each of its input records, and the last value in the changelog is
 *   the final aggregate;
 * - pipeline: stage 2's outputs are exactly the running aggregates, each
 *   audited with `updates = i` and `countSum = i(i+1)/2`; stage 1's output
 *   and both changelogs are checked too.
 * Duplicates and losses are counted by input record id.
 */
import { Duration, Effect } from "effect"
import kafkajs from "kafkajs"
import type { Aggregate, Audited, InputValue } from "../apps/model.ts"
import { aggregate, audit } from "../apps/model.ts"
import type { PartitionLog, WireClient, WireError } from "./wire.ts"

// ---------------------------------------------------------------------------
// the input

export interface Input {
  /** Input records per key, in offset order. */
  readonly byKey: ReadonlyMap<string, ReadonlyArray<InputValue>>
  /** How many times each id occurs in the input (more than once only if the driver retried a send). */
  readonly idCounts: ReadonlyMap<number, number>
  readonly records: number
  /** Records whose id already occurred (driver retries). */
  readonly repeated: number
  readonly problems: ReadonlyArray<string>
}

const parse = (text: string | null): unknown => {
  if (text === null) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null

const numbers = <K extends string>(u: unknown, fields: ReadonlyArray<K>): Record<K, number> | undefined => {
  if (!isObject(u)) return undefined
  const out = {} as Record<K, number>
  for (const f of fields) {
    const v = u[f]
    if (typeof v !== "number") return undefined
    out[f] = v
  }
  return out
}

const INPUT_FIELDS = ["id", "seq", "v"] as const
const AGGREGATE_FIELDS = ["count", "sum", "min", "max", "id", "seq"] as const
const AUDITED_FIELDS = [...AGGREGATE_FIELDS, "updates", "countSum"] as const

/** Builds the record of truth from the input topic. */
export const readInput = (logs: ReadonlyArray<PartitionLog>): Input => {
  const byKey = new Map<string, Array<InputValue>>()
  const keyPartition = new Map<string, number>()
  const idCounts = new Map<number, number>()
  const problems: Array<string> = []
  let records = 0
  let repeated = 0
  for (const log of logs) {
    for (const r of log.records) {
      const value = numbers(parse(r.value), INPUT_FIELDS)
      if (r.key === null || value === undefined) {
        problems.push(`input ${log.partition}@${r.offset}: unreadable record`)
        continue
      }
      records++
      const seen = idCounts.get(value.id) ?? 0
      if (seen > 0) repeated++
      idCounts.set(value.id, seen + 1)
      const list = byKey.get(r.key) ?? []
      list.push(value)
      byKey.set(r.key, list)
      const p = keyPartition.get(r.key)
      if (p === undefined) keyPartition.set(r.key, log.partition)
      else if (p !== log.partition) problems.push(`input key ${r.key} in partitions ${p} and ${log.partition}`)
    }
  }
  return { byKey, idCounts, records, repeated, problems }
}

// ---------------------------------------------------------------------------
// checks

/** The verdict on one output topic. */
export interface Check {
  readonly name: string
  readonly records: number
  readonly duplicates: number
  readonly lost: number
  readonly stateMismatches: number
  readonly details: ReadonlyArray<string>
}

interface Outputs<A> {
  readonly byKey: Map<string, Array<A>>
  readonly unreadable: number
  readonly splitKeys: number
  readonly count: number
}

const collect = <A>(logs: ReadonlyArray<PartitionLog>, decode: (u: unknown) => A | undefined): Outputs<A> => {
  const byKey = new Map<string, Array<A>>()
  const keyPartition = new Map<string, number>()
  const split = new Set<string>()
  let unreadable = 0
  let count = 0
  for (const log of logs) {
    for (const r of log.records) {
      const value = decode(parse(r.value))
      if (r.key === null || value === undefined) {
        unreadable++
        continue
      }
      count++
      const list = byKey.get(r.key) ?? []
      list.push(value)
      byKey.set(r.key, list)
      const p = keyPartition.get(r.key)
      if (p === undefined) keyPartition.set(r.key, log.partition)
      else if (p !== log.partition) split.add(r.key)
    }
  }
  return { byKey, unreadable, splitKeys: split.size, count }
}

const sameFields = <A extends Record<string, number>>(a: A, b: A, fields: ReadonlyArray<keyof A>) =>
  fields.every((f) => a[f] === b[f])

const transactionDetails = (name: string, logs: ReadonlyArray<PartitionLog>): Array<string> => {
  const committed = logs.reduce((n, l) => n + l.committedTransactions, 0)
  const aborted = logs.reduce((n, l) => n + l.abortedTransactions, 0)
  const abortedRecords = logs.reduce((n, l) => n + l.abortedRecords, 0)
  return [`${name}: ${committed} committed and ${aborted} aborted transactions (${abortedRecords} aborted records)`]
}

/** Problems that fail a run whatever the records say: open transactions, a stuck last stable offset. */
const logProblems = (name: string, logs: ReadonlyArray<PartitionLog>): Array<string> =>
  logs.flatMap((l) => [
    ...(l.openTransactions > 0 ? [`${name}-${l.partition}: ${l.openTransactions} open transaction(s)`] : []),
    ...(l.lastStableOffset !== l.highWatermark
      ? [`${name}-${l.partition}: last stable offset ${l.lastStableOffset} != high watermark ${l.highWatermark}`]
      : [])
  ])

/**
 * Compares per-key expected and actual sequences, counting duplicates and
 * losses by input id.
 */
const compare = <A extends Record<string, number> & { readonly id: number }>(params: {
  readonly name: string
  readonly input: Input
  readonly logs: ReadonlyArray<PartitionLog>
  readonly outputs: Outputs<A>
  readonly expected: (values: ReadonlyArray<InputValue>) => ReadonlyArray<A>
  readonly fields: ReadonlyArray<keyof A & string>
}): Check => {
  const { input, outputs } = params
  const details: Array<string> = []
  const outIds = new Map<number, number>()
  for (const list of outputs.byKey.values()) for (const a of list) outIds.set(a.id, (outIds.get(a.id) ?? 0) + 1)
  let duplicates = 0
  let lost = 0
  for (const [id, n] of input.idCounts) {
    const out = outIds.get(id) ?? 0
    if (out > n) duplicates += out - n
    if (out < n) lost += n - out
  }
  for (const [id, out] of outIds) if (!input.idCounts.has(id)) duplicates += out
  let mismatches = 0
  let duplicateOnly = 0
  const examples: Array<string> = []
  const keys = new Set([...input.byKey.keys(), ...outputs.byKey.keys()])
  const equal = (expected: ReadonlyArray<A>, actual: ReadonlyArray<A>) =>
    expected.length === actual.length &&
    expected.every((e, i) => {
      const a = actual[i]
      return a !== undefined && sameFields(e, a, params.fields)
    })
  for (const key of keys) {
    const expected = params.expected(input.byKey.get(key) ?? [])
    const actual = outputs.byKey.get(key) ?? []
    const ok = equal(expected, actual)
    if (!ok) {
      mismatches++
      // Would the key be right if repeated copies of a record (same id, same content) were dropped?
      const seen = new Set<string>()
      const deduplicated = actual.filter((a) => {
        const text = JSON.stringify(params.fields.map((f) => a[f]))
        if (seen.has(text)) return false
        seen.add(text)
        return true
      })
      if (equal(expected, deduplicated)) duplicateOnly++
      if (examples.length < 3) {
        const at = expected.findIndex((e, i) => {
          const a = actual[i]
          return a === undefined || !sameFields(e, a, params.fields)
        })
        const i = at < 0 ? expected.length : at
        examples.push(
          `key ${key}: ${expected.length} expected, ${actual.length} found; first difference at #${i}: ` +
            `expected ${JSON.stringify(expected[i] ?? null)} found ${JSON.stringify(actual[i] ?? null)}`
        )
      }
    }
  }
  const problems = logProblems(params.name, params.logs)
  if (outputs.unreadable > 0) details.push(`${params.name}: ${outputs.unreadable} unreadable records`)
  if (outputs.splitKeys > 0) details.push(`${params.name}: ${outputs.splitKeys} keys written to several partitions`)
  if (mismatches > 0) {
    details.push(
      `${params.name}: ${duplicateOnly} of ${mismatches} mismatching keys differ only by repeated identical records` +
        (duplicateOnly < mismatches ? `; ${mismatches - duplicateOnly} are wrong otherwise (missing, reordered or wrong values)` : "")
    )
  }
  details.push(...problems, ...transactionDetails(params.name, params.logs), ...examples)
  return {
    name: params.name,
    records: outputs.count,
    duplicates,
    lost,
    stateMismatches: mismatches + outputs.unreadable + outputs.splitKeys + problems.length,
    details
  }
}

const runningAggregates = (values: ReadonlyArray<InputValue>): Array<Aggregate> => {
  const out: Array<Aggregate> = []
  let state: Aggregate | undefined
  for (const v of values) {
    state = aggregate(state, v)
    out.push(state)
  }
  return out
}

const runningAudited = (values: ReadonlyArray<InputValue>): Array<Audited> => {
  let state: ReturnType<typeof audit> | undefined
  return runningAggregates(values).map((a) => {
    state = audit(state, a)
    return { ...a, ...state }
  })
}

/** The echo output must equal the input, key by key. */
export const checkEcho = (name: string, input: Input, logs: ReadonlyArray<PartitionLog>): Check =>
  compare({
    name,
    input,
    logs,
    outputs: collect(logs, (u) => numbers(u, INPUT_FIELDS)),
    expected: (values) => values,
    fields: INPUT_FIELDS
  })

/** The aggregate output must be the running aggregates of the input, key by key. */
export const checkAggregate = (name: string, input: Input, logs: ReadonlyArray<PartitionLog>): Check =>
  compare({
    name,
    input,
    logs,
    outputs: collect(logs, (u) => numbers(u, AGGREGATE_FIELDS)),
    expected: runningAggregates,
    fields: AGGREGATE_FIELDS
  })

/** The pipeline's final output must be the audited running aggregates of the input, key by key. */
export const checkAudited = (name: string, input: Input, logs: ReadonlyArray<PartitionLog>): Check =>
  compare({
    name,
    input,
    logs,
    outputs: collect(logs, (u) => numbers(u, AUDITED_FIELDS)),
    expected: runningAudited,
    fields: AUDITED_FIELDS
  })

/** The last changelog value of every key must be its final state. */
export const checkChangelog = <A extends Record<string, number>>(
  name: string,
  input: Input,
  logs: ReadonlyArray<PartitionLog>,
  final: (values: ReadonlyArray<InputValue>) => A | undefined,
  fields: ReadonlyArray<keyof A & string>
): Check => {
  const last = new Map<string, unknown>()
  for (const log of logs) for (const r of log.records) if (r.key !== null) last.set(r.key, parse(r.value))
  let mismatches = 0
  const examples: Array<string> = []
  const keys = new Set([...input.byKey.keys(), ...last.keys()])
  for (const key of keys) {
    const expected = final(input.byKey.get(key) ?? [])
    const found = numbers(last.get(key), fields)
    const ok = expected === undefined ? found === undefined : found !== undefined && sameFields(expected, found, fields)
    if (!ok) {
      mismatches++
      if (examples.length < 3) {
        examples.push(`${name} key ${key}: expected ${JSON.stringify(expected ?? null)} found ${JSON.stringify(last.get(key) ?? null)}`)
      }
    }
  }
  const problems = logProblems(name, logs)
  return {
    name,
    records: last.size,
    duplicates: 0,
    lost: 0,
    stateMismatches: mismatches + problems.length,
    details: [...problems, ...examples]
  }
}

export const finalAggregate = (values: ReadonlyArray<InputValue>): Aggregate | undefined => runningAggregates(values).at(-1)

export const finalAudit = (values: ReadonlyArray<InputValue>) => {
  const last = runningAudited(values).at(-1)
  return last === undefined ? undefined : { updates: last.updates, countSum: last.countSum }
}

export const AGGREGATE_STATE_FIELDS = AGGREGATE_FIELDS
export const AUDIT_STATE_FIELDS = ["updates", "countSum"] as const

/** A topic that only has to be settled: no open transaction, last stable offset at the high watermark. */
export const checkLog = (name: string, logs: ReadonlyArray<PartitionLog>): Check => {
  const problems = logProblems(name, logs)
  return {
    name,
    records: logs.reduce((n, l) => n + l.records.length, 0),
    duplicates: 0,
    lost: 0,
    stateMismatches: problems.length,
    details: problems
  }
}

/** Sums checks into one verdict (the first one's name). */
export const combine = (name: string, checks: ReadonlyArray<Check>, records: number): Check => ({
  name,
  records,
  duplicates: checks.reduce((n, c) => n + c.duplicates, 0),
  lost: checks.reduce((n, c) => n + c.lost, 0),
  stateMismatches: checks.reduce((n, c) => n + c.stateMismatches, 0),
  details: checks.flatMap((c) => c.details)
})

// ---------------------------------------------------------------------------
// waiting for the end

/** A kafkajs admin client, used only for group metadata (state, committed offsets), never for records. */
export const groupAdmin = (brokers: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const admin = new kafkajs.Kafka({
        clientId: "skein-chaos-verifier",
        brokers: [...brokers],
        logLevel: kafkajs.logLevel.NOTHING,
        retry: { retries: 10 }
      }).admin()
      await admin.connect()
      return admin
    }),
    (admin) => Effect.promise(() => admin.disconnect().catch(() => undefined))
  )

export type GroupAdmin = Effect.Effect.Success<ReturnType<typeof groupAdmin>>

/**
 * How many committed records of `topic` the group has not consumed yet: read
 * exactly (transactions resolved) when the gap is small, else the offset gap.
 */
export const lag = (
  admin: GroupAdmin,
  wire: WireClient,
  group: string,
  topic: string
): Effect.Effect<number, WireError | Error> =>
  Effect.gen(function*() {
    const ends = yield* wire.ends(topic)
    const committed = yield* Effect.tryPromise({
      try: () => admin.fetchOffsets({ groupId: group, topics: [topic] }),
      catch: (e) => (e instanceof Error ? e : new Error(String(e)))
    })
    const byPartition = new Map<number, number>()
    for (const t of committed) for (const p of t.partitions) byPartition.set(p.partition, Number(p.offset))
    let total = 0
    for (const e of ends) {
      const from = Math.max(0, byPartition.get(e.partition) ?? 0)
      const gap = e.highWatermark - from
      if (gap <= 0) continue
      // A gap may be only transaction markers (or aborted records): count the real records.
      total += gap > 200 ? gap : (yield* wire.readFrom(topic, e.partition, from)).records.length
    }
    return total
  })

/** Group state per group id (`Empty`, `Stable`, `PreparingRebalance`, `Dead`, ...). */
export const groupStates = (admin: GroupAdmin, groups: ReadonlyArray<string>) =>
  Effect.tryPromise({
    try: () => admin.describeGroups([...groups]),
    catch: (e) => (e instanceof Error ? e : new Error(String(e)))
  }).pipe(
    Effect.map((described) =>
      new Map(described.groups.map((g) => [g.groupId, { state: g.state, members: g.members.length }]))
    )
  )

/**
 * Waits until every group is empty and every topic has no open transaction
 * (last stable offset == high watermark on every partition).
 */
export const awaitQuiescence = (params: {
  readonly admin: GroupAdmin
  readonly wire: WireClient
  readonly groups: ReadonlyArray<string>
  readonly topics: ReadonlyArray<string>
  readonly timeout: Duration.Duration
}): Effect.Effect<{ readonly quiet: boolean; readonly waitedMs: number; readonly blockers: ReadonlyArray<string> }> => {
  const started = Date.now()
  const probe = Effect.gen(function*() {
    const blockers: Array<string> = []
    const states = yield* groupStates(params.admin, params.groups)
    for (const group of params.groups) {
      const s = states.get(group)
      if (s !== undefined && s.state !== "Empty" && s.state !== "Dead") {
        blockers.push(`group ${group} is ${s.state} with ${s.members} member(s)`)
      }
    }
    for (const topic of params.topics) {
      const ends = yield* params.wire.ends(topic)
      for (const e of ends) {
        if (e.lastStableOffset !== e.highWatermark) {
          blockers.push(`${topic}-${e.partition}: LSO ${e.lastStableOffset} < HW ${e.highWatermark}`)
        }
      }
    }
    return blockers
  }).pipe(Effect.catchAll((e) => Effect.succeed([`probe failed: ${e.message}`])))
  return Effect.gen(function*() {
    for (;;) {
      const blockers = yield* probe
      const waitedMs = Date.now() - started
      if (blockers.length === 0 || waitedMs > Duration.toMillis(params.timeout)) {
        return { quiet: blockers.length === 0, waitedMs, blockers }
      }
      yield* Effect.sleep(Duration.millis(500))
    }
  })
}
