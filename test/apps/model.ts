/**
 * The records of the chaos harness: what the driver writes and what each app
 * under test emits. Plain Schemas, shared by the driver, the apps and the
 * verifier (which only parses them as JSON; it never uses Skein's code).
 */
import { Schema } from "effect"

/** A driver record: a globally unique id, a per-key sequence number (1-based) and a value. */
export const InputValue = Schema.Struct({
  id: Schema.Number,
  seq: Schema.Number,
  v: Schema.Number
})
export type InputValue = typeof InputValue.Type

/** Per-key running aggregate, emitted for every input record (`id`, `seq`: the record's). */
export const Aggregate = Schema.Struct({
  count: Schema.Number,
  sum: Schema.Number,
  min: Schema.Number,
  max: Schema.Number,
  id: Schema.Number,
  seq: Schema.Number
})
export type Aggregate = typeof Aggregate.Type

/** State of the pipeline's second stage: how many aggregates it saw, and the sum of their counts. */
export const AuditState = Schema.Struct({
  updates: Schema.Number,
  countSum: Schema.Number
})
export type AuditState = typeof AuditState.Type

/** The pipeline's final record: the stage-1 aggregate with the stage-2 audit counters. */
export const Audited = Schema.Struct({
  ...Aggregate.fields,
  updates: Schema.Number,
  countSum: Schema.Number
})
export type Audited = typeof Audited.Type

/** The state of one key after `record`, from its previous state. */
export const aggregate = (previous: Aggregate | undefined, record: InputValue): Aggregate =>
  previous === undefined
    ? { count: 1, sum: record.v, min: record.v, max: record.v, id: record.id, seq: record.seq }
    : {
      count: previous.count + 1,
      sum: previous.sum + record.v,
      min: Math.min(previous.min, record.v),
      max: Math.max(previous.max, record.v),
      id: record.id,
      seq: record.seq
    }

/** The audit of one key after stage-1 record `record`. */
export const audit = (previous: AuditState | undefined, record: Aggregate): AuditState => ({
  updates: (previous?.updates ?? 0) + 1,
  countSum: (previous?.countSum ?? 0) + record.count
})

/**
 * The windowed app's second key of a driver record: read from its value (`v` modulo `groups`),
 * so grouping by it moves records across partitions (a repartition topic). `g00`..`g<groups-1>`.
 */
export const windowGroup = (v: number, groups: number): string =>
  `g${String(((v % groups) + groups) % groups).padStart(String(groups - 1).length, "0")}`
