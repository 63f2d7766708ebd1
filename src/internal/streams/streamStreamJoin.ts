/**
 * A windowed stream-stream join on Skein's runtime (Kafka Streams'
 * `KStreamKStreamJoin` with its outer-join store, since 3.1): the state it
 * keeps in its task's store and what one record does to it. Everything lives
 * in the transformer's own state (one Schema, four kinds of state keys), read
 * through `TaskState` and written through `Result.others`, so it commits in
 * the record's transaction, is changelogged and restored like any state:
 *
 * - `t`: the join's clock: its stream time (the largest timestamp of the
 *   records that reached the join, from either side), each side's store time
 *   (the largest timestamp it stored: Kafka Streams' window store's observed
 *   time, which sets what is still kept), a sequence for arrival order, and
 *   the slots of the time indexes below.
 * - `l{key}`, `r{key}`: a side's records of a key (timestamp, value as text,
 *   arrival, status), and the key as its input topic's codec writes it.
 * - `p{slot}`: the side stores with a record waiting for a partner, by the
 *   time its window plus grace closes (a left or outer join's).
 * - `xl{slot}`, `xr{slot}`: the side stores with a record leaving the
 *   side's retention (before + after + grace), by store time.
 *
 * A record (left: window `[t - before, t + after]`; right: `[t - after,
 * t + before]`) first moves stream time and emits, in order of timestamp,
 * side (right first), key and arrival, every waiting record whose window plus
 * grace stream time has passed (`l + null`, `null + r`); then it joins the
 * other side's records of its key in its window that the other side still
 * keeps (its store time minus the retention), oldest first, each with the
 * larger timestamp of the two. A record with no partner in a left (left
 * side) or outer join waits for one until its window plus grace closes;
 * one whose window plus grace has already closed is emitted at once. A record
 * emitted without a partner joins no later record: its result was final.
 *
 * Kafka Streams differs in two places, both wrong (docs/streams.md): it
 * checks for closed windows only when a record's timestamp equals stream
 * time and after its own throttles, so an `l + null` can come out late; and
 * it emits `l + null` at once for an out-of-order record whose window end has
 * passed (grace or not), and lets a record whose `l + null` was emitted still
 * join, so one record can have both `l + null` and `l + r`.
 *
 * @internal
 */
import { Effect, Either, Option, Schema } from "effect"
import * as JoinWindows from "../../JoinWindows.ts"
import type { KeyChange, TaskState } from "../../Transformer.ts"
import * as Transformer from "../../Transformer.ts"
import type * as Graph from "./graph.ts"
import type { KeyText } from "./keyText.ts"

/** The state key of the join's clock. */
export const clockKey = "t"

/** A record's status: 0 joined (or not waiting), 1 waiting for a partner, 2 emitted without one. */
const Status = Schema.Literal(0, 1, 2)

const Entry = Schema.Struct({ timestamp: Schema.Number, seq: Schema.Number, value: Schema.String, status: Status })
type Entry = typeof Entry.Type

/** A side's records of one key, in timestamp then arrival order. */
const Stored = Schema.TaggedStruct("Stored", { key: Schema.String, topic: Schema.String, records: Schema.Array(Entry) })
type Stored = typeof Stored.Type

/** A slot of a time index: the side stores (state keys) with something due at `at`. */
const Due = Schema.TaggedStruct("Due", { entries: Schema.Array(Schema.Struct({ at: Schema.Number, store: Schema.String })) })

const Clock = Schema.TaggedStruct("Clock", {
  streamTime: Schema.Number,
  leftTime: Schema.Number,
  rightTime: Schema.Number,
  seq: Schema.Number,
  /** Slots of the waiting records' close times, ascending. */
  pending: Schema.Array(Schema.Number),
  /** Slots of the left and right records' expiry (store) times, ascending. */
  leftExpiry: Schema.Array(Schema.Number),
  rightExpiry: Schema.Array(Schema.Number)
})
type Clock = typeof Clock.Type

/** The state of a stream-stream join's task: what each kind of state key holds. */
export const stateSchema = Schema.Union(Clock, Stored, Due)
export type State = typeof stateSchema.Type

export type Side = "left" | "right"

/** What a stream-stream join needs to run. */
export interface Operator {
  readonly kind: Graph.StreamJoin["kind"]
  readonly windows: JoinWindows.JoinWindows
  /** The user's joiner; what it throws goes to the record's boundary (compile.ts `guarded`). */
  readonly joiner: Graph.StreamJoin["joiner"]
  /** Per input topic, its keys as text and back. */
  readonly keyText: (topic: string) => KeyText
  readonly values: Graph.StreamJoin["values"]
}

const prefixOf = (side: Side): string => side === "left" ? "l" : "r"
const storeKey = (side: Side, keyText: string): string => `${prefixOf(side)}${keyText}`
const sideOf = (store: string): Side => store.startsWith("l") ? "left" : "right"
const otherOf = (side: Side): Side => side === "left" ? "right" : "left"

/** True when a record of `side` without a partner is emitted (`l + null`, `null + r`). */
export const waits = (kind: Operator["kind"], side: Side): boolean => kind === "outer" || (kind === "left" && side === "left")

/** When a record's window plus grace closes: stream time must pass it (left: `t + after + grace`). */
const closeOf = (windows: JoinWindows.JoinWindows, side: Side, timestamp: number): number =>
  timestamp + (side === "left" ? windows.afterMs : windows.beforeMs) + windows.graceMs

/**
 * One input record's view of its task's state: the clock (loaded once) and
 * every state key it reads or writes, as the record has changed them.
 */
export class Context {
  private readonly changed = new Map<string, Option.Option<State>>()
  private clockChanged = false

  /** `task` reads the task's states themselves (no copy): this code never mutates them. */
  private constructor(private clock: Clock, private readonly task: TaskState<State>) {}

  static load(task: TaskState<State>): Effect.Effect<Context, unknown> {
    return Effect.flatMap(task.get(clockKey), (stored) => {
      if (Option.isSome(stored) && stored.value._tag !== "Clock") {
        return Effect.dieMessage(`Skein invariant broken: the state key ${clockKey} holds ${stored.value._tag}`)
      }
      const clock: Clock = Option.isSome(stored) && stored.value._tag === "Clock"
        ? stored.value
        // Kafka Streams' stream time and window stores' observed time start at -1 (no timestamp).
        : { _tag: "Clock", streamTime: -1, leftTime: -1, rightTime: -1, seq: 0, pending: [], leftExpiry: [], rightExpiry: [] }
      return Effect.succeed(new Context(clock, task))
    })
  }

  get time(): Clock {
    return this.clock
  }

  setTime(clock: Clock): void {
    this.clock = clock
    this.clockChanged = true
  }

  get(key: string): Effect.Effect<Option.Option<State>, unknown> {
    const changed = this.changed.get(key)
    return changed !== undefined ? Effect.succeed(changed) : this.task.get(key)
  }

  put(key: string, state: Option.Option<State>): void {
    this.changed.set(key, state)
  }

  /** The record's state changes, for the transform's result (its own state key is never written). */
  result(): { readonly others: ReadonlyArray<KeyChange<State>> } {
    const others: Array<KeyChange<State>> = []
    for (const [key, state] of this.changed) {
      others.push({ key, state: Option.isSome(state) ? Transformer.set(state.value) : Transformer.remove })
    }
    if (this.clockChanged) others.push({ key: clockKey, state: Transformer.set(this.clock) })
    return { others }
  }
}

/** A time index: its slots' state keys (`{prefix}{slot}`) and their width. */
interface Index {
  readonly prefix: string
  readonly slotMs: number
}

/**
 * Adds `store` as due at `at` to `index`; `slots` (a copy of the clock's) gains its slot. With
 * `latest`, a slot keeps one entry per store, its latest time (expiry: a store is pruned on every
 * write anyway, the index only reaches the keys no record touches again).
 */
const addDue = (
  context: Context,
  index: Index,
  slots: Array<number>,
  at: number,
  store: string,
  latest = false
): Effect.Effect<void, unknown> => {
  const slot = Math.floor(at / index.slotMs)
  const key = `${index.prefix}${slot}`
  return Effect.map(context.get(key), (stored) => {
    const entries = Option.isSome(stored) && stored.value._tag === "Due" ? stored.value.entries : []
    const same = entries.findIndex((e) => e.store === store && (latest || e.at === at))
    if (same === -1) {
      context.put(key, Option.some({ _tag: "Due", entries: [...entries, { at, store }] }))
    } else if (entries[same]!.at < at) {
      context.put(key, Option.some({ _tag: "Due", entries: entries.map((e, i) => i === same ? { at, store } : e) }))
    }
    if (!slots.includes(slot)) {
      slots.push(slot)
      slots.sort((a, b) => a - b)
    }
  })
}

/** The stores of `index` due at or before `upTo`, each once, taken out of it (and their slots out of `slots`). */
const takeDue = (context: Context, index: Index, slots: Array<number>, upTo: number): Effect.Effect<ReadonlyArray<string>, unknown> =>
  Effect.gen(function*() {
    const due = new Set<string>()
    while (slots.length > 0 && slots[0]! * index.slotMs <= upTo) {
      const key = `${index.prefix}${slots[0]!}`
      const stored = yield* context.get(key)
      const entries = Option.isSome(stored) && stored.value._tag === "Due" ? stored.value.entries : []
      const rest = entries.filter((e) => e.at > upTo)
      for (const e of entries) if (e.at <= upTo) due.add(e.store)
      if (rest.length > 0) {
        // The slot holds later times: every later slot starts after `upTo` too.
        if (rest.length !== entries.length) context.put(key, Option.some({ _tag: "Due", entries: rest }))
        break
      }
      context.put(key, Option.none())
      slots.shift()
    }
    return [...due]
  })

const storedOf = (context: Context, key: string): Effect.Effect<Stored | undefined, unknown> =>
  Effect.flatMap(context.get(key), (state) => {
    if (Option.isNone(state)) return Effect.succeed(undefined)
    return state.value._tag === "Stored"
      ? Effect.succeed(state.value)
      : Effect.dieMessage(`Skein invariant broken: the state key ${key} holds ${state.value._tag}`)
  })

/** Writes a side store, without the records its side no longer keeps (unless one still waits). */
const putStored = (context: Context, key: string, stored: Stored, keptFrom: number): void => {
  const records = stored.records.filter((r) => r.status === 1 || r.timestamp >= keptFrom)
  context.put(key, records.length === 0 ? Option.none() : Option.some({ ...stored, records }))
}

/** The first timestamp a side still keeps (Kafka Streams' window store: `observed - retention + 1`). */
const keptFrom = (operator: Operator, storeTime: number): number => storeTime - JoinWindows.retentionMs(operator.windows) + 1

const indexes = (operator: Operator) => {
  // About as many slots as times per slot over the retention.
  const slotMs = Math.max(1, Math.ceil(Math.sqrt(Math.max(1, JoinWindows.retentionMs(operator.windows)))))
  return {
    pending: { prefix: "p", slotMs },
    expiry: (side: Side): Index => ({ prefix: `x${prefixOf(side)}`, slotMs })
  }
}

/** Decodes a stored value of `side` (written by `values[side].encode`). */
const decodeValue = (operator: Operator, side: Side, text: string): Effect.Effect<unknown, unknown> => {
  const decoded = operator.values[side].decode(text)
  return Either.isLeft(decoded) ? Effect.fail(decoded.left) : Effect.succeed(decoded.right)
}

/** The result of a record without a partner: the joiner with `null` for the missing side. */
const unmatched = (operator: Operator, side: Side, key: unknown, value: unknown): unknown =>
  side === "left" ? operator.joiner(value, null, key) : operator.joiner(null, value, key)

/**
 * Emits every waiting record whose window plus grace stream time has passed,
 * by timestamp, side (right first), key (as bytes) and arrival, as Kafka
 * Streams' outer-join store orders them.
 */
const emitClosed = (
  operator: Operator,
  context: Context,
  pendingSlots: Array<number>,
  forward: (record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>
): Effect.Effect<void, unknown, unknown> =>
  Effect.gen(function*() {
    const streamTime = context.time.streamTime
    const stores = yield* takeDue(context, indexes(operator).pending, pendingSlots, streamTime - 1)
    if (stores.length === 0) return
    const closed: Array<{ readonly store: string; readonly stored: Stored; readonly entry: Entry }> = []
    const loaded = new Map<string, Stored>()
    for (const store of stores) {
      const stored = yield* storedOf(context, store)
      if (stored === undefined) continue
      loaded.set(store, stored)
      const side = sideOf(store)
      for (const entry of stored.records) {
        if (entry.status === 1 && closeOf(operator.windows, side, entry.timestamp) < streamTime) closed.push({ store, stored, entry })
      }
    }
    const rank = (store: string) => sideOf(store) === "right" ? 0 : 1
    closed.sort((a, b) =>
      a.entry.timestamp - b.entry.timestamp || rank(a.store) - rank(b.store) ||
      Buffer.compare(Buffer.from(a.stored.key), Buffer.from(b.stored.key)) || a.entry.seq - b.entry.seq
    )
    for (const { entry, store, stored } of closed) {
      const side = sideOf(store)
      const key = operator.keyText(stored.topic).decode(stored.key)
      if (Either.isLeft(key)) return yield* Effect.fail(key.left)
      const value = yield* decodeValue(operator, side, entry.value)
      yield* forward({ key: key.right, value: unmatched(operator, side, key.right, value), timestamp: entry.timestamp, headers: [] })
    }
    for (const [store, stored] of loaded) {
      const side = sideOf(store)
      const records = stored.records.map((r) =>
        r.status === 1 && closeOf(operator.windows, side, r.timestamp) < streamTime ? { ...r, status: 2 as const } : r
      )
      const storeTime = side === "left" ? context.time.leftTime : context.time.rightTime
      putStored(context, store, { ...stored, records }, keptFrom(operator, storeTime))
    }
  })

/**
 * Joins `record` (of `side`, from `inputTopic`, with its event time) with
 * the other side, after emitting the waiting records it closes. `forward`
 * passes a result on; `dropped` counts a record the join drops (no key in an
 * inner join or on a side without `null` results, no value).
 */
export const process = (
  operator: Operator,
  context: Context,
  side: Side,
  record: Graph.StreamRecord,
  inputTopic: string,
  forward: (record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>,
  dropped: (why: string) => Effect.Effect<void>
): Effect.Effect<void, unknown, unknown> =>
  Effect.gen(function*() {
    const { windows } = operator
    const t = record.timestamp
    const start = context.time
    const pendingSlots = [...start.pending]
    // Every record that reaches the join moves its stream time, as in Kafka Streams (one without a key too).
    context.setTime({ ...start, streamTime: Math.max(start.streamTime, t) })
    yield* emitClosed(operator, context, pendingSlots, forward)
    context.setTime({ ...context.time, pending: pendingSlots })

    if (record.key === null) {
      // A left or outer join emits a record without a key at once, without a partner (Kafka Streams since KIP-962).
      if (record.value !== null && waits(operator.kind, side)) {
        return yield* forward({ ...record, value: unmatched(operator, side, null, record.value) })
      }
      return yield* dropped("without a key")
    }
    const ownTimeOf = (clock: Clock) => side === "left" ? clock.leftTime : clock.rightTime
    const withOwnTime = (clock: Clock, time: number): Clock =>
      side === "left" ? { ...clock, leftTime: time } : { ...clock, rightTime: time }
    if (record.value === null) {
      // Kafka Streams' window store still takes the record's time (a `null` value stores nothing).
      context.setTime(withOwnTime(context.time, Math.max(ownTimeOf(context.time), t)))
      return yield* dropped("without a value")
    }

    const keyText = operator.keyText(inputTopic).encode(record.key)
    if (Either.isLeft(keyText)) return yield* Effect.fail(keyText.left)
    const valueText = operator.values[side].encode(record.value)
    if (Either.isLeft(valueText)) return yield* Effect.fail(valueText.left)

    // The other side's records of the key in the record's window, that the other side still keeps.
    const other = otherOf(side)
    const [beforeMs, afterMs] = side === "left" ? [windows.beforeMs, windows.afterMs] : [windows.afterMs, windows.beforeMs]
    const otherTime = other === "left" ? context.time.leftTime : context.time.rightTime
    const from = Math.max(0, t - beforeMs, keptFrom(operator, otherTime))
    const to = Math.max(0, t + afterMs)
    const otherKey = storeKey(other, keyText.right)
    const otherStored = yield* storedOf(context, otherKey)
    let matched = false
    let otherChanged = false
    const otherRecords: Array<Entry> = []
    for (const entry of otherStored?.records ?? []) {
      // A record emitted without a partner joins no more: its result was final.
      if (entry.timestamp < from || entry.timestamp > to || entry.status === 2) {
        otherRecords.push(entry)
        continue
      }
      matched = true
      const otherValue = yield* decodeValue(operator, other, entry.value)
      const value = side === "left"
        ? operator.joiner(record.value, otherValue, record.key)
        : operator.joiner(otherValue, record.value, record.key)
      yield* forward({ ...record, value, timestamp: Math.max(t, entry.timestamp) })
      if (entry.status === 1) {
        otherChanged = true
        otherRecords.push({ ...entry, status: 0 })
      } else {
        otherRecords.push(entry)
      }
    }
    if (otherStored !== undefined && otherChanged) {
      putStored(context, otherKey, { ...otherStored, records: otherRecords }, keptFrom(operator, otherTime))
    }

    const index = indexes(operator)
    const clock = context.time
    const seq = clock.seq
    let status: Entry["status"] = 0
    if (!matched && waits(operator.kind, side)) {
      const close = closeOf(windows, side, t)
      if (close < clock.streamTime) {
        // Its window plus grace has closed already: its result without a partner is final.
        yield* forward({ ...record, value: unmatched(operator, side, record.key, record.value) })
        status = 2
      } else {
        status = 1
        yield* addDue(context, index.pending, pendingSlots, close, storeKey(side, keyText.right))
      }
    }

    // The record joins later records of the other side while its side keeps it.
    const ownTime = Math.max(ownTimeOf(clock), t)
    const ownFrom = keptFrom(operator, ownTime)
    const ownKey = storeKey(side, keyText.right)
    const expirySlots = [...(side === "left" ? clock.leftExpiry : clock.rightExpiry)]
    const ownStored = (yield* storedOf(context, ownKey)) ?? { _tag: "Stored" as const, key: keyText.right, topic: inputTopic, records: [] }
    if (t >= ownFrom || status === 1) {
      const records = [...ownStored.records]
      let at = records.length
      while (at > 0 && records[at - 1]!.timestamp > t) at--
      records.splice(at, 0, { timestamp: t, seq, value: valueText.right, status })
      putStored(context, ownKey, { ...ownStored, records }, ownFrom)
      if (t >= ownFrom) yield* addDue(context, index.expiry(side), expirySlots, t + JoinWindows.retentionMs(windows), ownKey, true)
    } else if (ownStored.records.length > 0) {
      putStored(context, ownKey, ownStored, ownFrom)
    }
    // The side's records its store time has passed are deleted (unless one still waits for its close).
    for (const store of yield* takeDue(context, index.expiry(side), expirySlots, ownTime)) {
      const stored = yield* storedOf(context, store)
      if (stored !== undefined) putStored(context, store, stored, ownFrom)
    }
    const latest = withOwnTime(context.time, ownTime)
    context.setTime(
      side === "left"
        ? { ...latest, seq: seq + 1, pending: pendingSlots, leftExpiry: expirySlots }
        : { ...latest, seq: seq + 1, pending: pendingSlots, rightExpiry: expirySlots }
    )
  })
