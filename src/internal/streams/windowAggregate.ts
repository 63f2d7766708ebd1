/**
 * A windowed aggregation on Skein's runtime: the state it keeps in its
 * task's store and what one record does to it. Everything lives in the
 * transformer's own state (one Schema, three kinds of state keys), read
 * through `TaskState` and written through `Result.others`, so it commits in
 * the record's transaction, is changelogged, restored and kept like any
 * state:
 *
 * - `t`: the task's time: its stream time (the largest event time of the
 *   records the sub-topology read), the aggregation's own observed time (the
 *   largest of the records it aggregated: Kafka Streams closes windows on
 *   it), and the close times that have windows waiting, ascending.
 * - `k{key}`: a key's open windows (start, aggregate, largest timestamp),
 *   and the key as its input topic's codec writes it, to emit its windows
 *   when a record of another key closes them.
 * - `c{close time}`: the state keys with a window closing then.
 *
 * A record's windows that are still open (`end + grace > observed time`) are
 * updated (and, emitting updates, forwarded); then every window whose close
 * time the observed time has reached is closed: emitted once (emitting final
 * results), and deleted (its retention is its size plus grace). The index by
 * close time has one entry per distinct close time, so a record reads only
 * the buckets due.
 *
 * @internal
 */
import { Effect, Either, Exit, Metric, Option, Predicate, Schema } from "effect"
import type { Types } from "effect"
import * as Eager from "./eager.ts"
import * as TimeWindows from "../../TimeWindows.ts"
import type * as Topic from "../../Topic.ts"
import type { KeyChange, TaskState } from "../../Transformer.ts"
import * as Transformer from "../../Transformer.ts"
import type { EncodeError } from "../../SkeinError.ts"
import { LateRecord } from "../../SkeinError.ts"
import * as Windowed from "../../Windowed.ts"
import type * as Graph from "./graph.ts"
import type { KeyText } from "./keyText.ts"

/** The state key of the task's time. */
export const timeKey = "t"
/** The state key of a record key's windows. */
export const windowsKey = (stateKey: string): string => `k${stateKey}`
/** The state key of the windows closing at `closeTime` (observed time). */
export const closingKey = (closeTime: number): string => `c${closeTime}`
/** The state key of the windows expiring at `expiry` (store time: sliding windows). */
export const expiringKey = (expiry: number): string => `x${expiry}`

const Time = Schema.TaggedStruct("Time", {
  streamTime: Schema.Number,
  observed: Schema.Number,
  /** The slots (`TimeIndex`) of the close times with windows waiting, ascending. */
  closes: Schema.Array(Schema.Number),
  /** Sliding and session windows: the largest window start (end) written (Kafka Streams' store's time), -1 before any. */
  storeTime: Schema.Number,
  /** Sliding windows: the slots of the store times at which closed windows expire, ascending. */
  expiries: Schema.Array(Schema.Number)
})

/** The distinct times of one slot of a `TimeIndex`, ascending. */
const Times = Schema.TaggedStruct("Times", { times: Schema.Array(Schema.Number) })
export type Time = typeof Time.Type

/**
 * A bucket of the index (`c{close time}`, `x{expiry}`): the state keys with a window due then.
 * Its head holds at most `chunkSize` keys; a full head moves to a chunk of its own
 * (`{bucket}.{n}`), so adding a key rewrites at most `chunkSize` of them however many keys
 * share the bucket.
 */
const Closing = Schema.TaggedStruct("Closing", { keys: Schema.Array(Schema.String), chunks: Schema.Number })

const chunkSize = 128
const chunkKey = (bucketKey: string, n: number): string => `${bucketKey}.${n}`

/**
 * Whether `state` is the task's bookkeeping (its time, an index bucket or
 * slot), not a key's windows: numbers and state keys only, storable by
 * construction, so the batch stores it once per transaction
 * (`storedAtEnd.ts`), where the task's time changes with nearly every record.
 */
export const isBookkeeping = (state: unknown): boolean =>
  Predicate.isTagged(state, "Time") || Predicate.isTagged(state, "Closing") || Predicate.isTagged(state, "Times")

/**
 * The states of a windowed aggregation of `kind` the batch stores once per
 * transaction (`storedAtEnd.ts`): its bookkeeping, and a count's windows too
 * (Skein's own `add`: whole numbers, and key texts), storable by construction.
 * The windows of a `reduce` or `aggregate` hold what the user's functions
 * made: each is stored (and checked) as its record finishes.
 */
export const storedAtEndOf = (kind: Graph.Aggregate["kind"]): (state: unknown) => boolean =>
  kind === "count" ? () => true : isBookkeeping

/** The state of a windowed sub-topology's task: what each kind of state key holds. */
export const stateSchema = <A, I>(value: Schema.Schema<A, I>) =>
  Schema.Union(
    Time,
    Schema.TaggedStruct("Windows", {
      key: Schema.String,
      topic: Schema.String,
      windows: Schema.Array(Schema.Struct({ start: Schema.Number, value, timestamp: Schema.Number }))
    }),
    Closing,
    Times
  )

export type WindowState<A> = Schema.Schema.Type<ReturnType<typeof stateSchema<A, unknown>>>
export type Windows<A> = Extract<WindowState<A>, { readonly _tag: "Windows" }>

/**
 * Late records (past grace for a window they belong to), per windowed
 * aggregation (`skein_streams_late_records_total`, on the health endpoint's
 * `/metrics`).
 */
export { streamsLateRecords as lateRecords } from "../runtime/RunnerMetrics.ts"

/** What a windowed aggregation needs besides its spec. */
export interface Operator<A> {
  readonly name: string
  /** The sub-topology's name, for logs. */
  readonly subTopology: string
  readonly windowing: Graph.Windowing
  readonly add: Graph.AggregateSpec<A, unknown>["add"]
  /** Session windows: how merged sessions' aggregates combine. */
  readonly session?: Graph.AggregateSpec<A, unknown>["session"]
  readonly keyText: (topic: string) => KeyText
  /** Late records seen since the start, for the log. */
  readonly late: { count: number }
  /** `skein_streams_late_records_total` of this operator (`RunnerMetrics.streamsLateRecordsOf`). */
  readonly lateCounter: Metric.Metric.Counter<number>
}

/**
 * One input record's view of its task's state: the record's own state key
 * (its windows), the task's time, and every other key it reads or writes,
 * as the record has changed them.
 */
export class RecordContext<A> {
  /** Other keys the record changed (made at the first: most records change only their own key and the time). */
  private changed: Map<string, Option.Option<WindowState<A>>> | undefined = undefined
  private time: Time | undefined
  /** The task's time as this record changed it, while no one else holds it (`advanceTime`). */
  private ownTime: Types.Mutable<Time> | undefined = undefined
  private timeChanged = false
  private ownChanged = false
  /** Whether `own`'s aggregates are the record's private copies (or values it built). */
  private ownPrivate = false

  /**
   * `own` and what `task` reads are the task's states themselves, not copies
   * (the batch reads the DSL's states without one): this code never mutates
   * them, and `copyValue` copies the aggregates in them that are objects,
   * which user functions (`add`, `merge`, the operators after the
   * aggregation) are handed and may mutate.
   */
  constructor(
    readonly ownKey: string,
    private own: Option.Option<WindowState<A>>,
    private readonly task: TaskState<WindowState<A>>,
    private readonly copyValue: (value: A) => Either.Either<A, EncodeError>
  ) {}

  get(key: string): Effect.Effect<Option.Option<WindowState<A>>, unknown> {
    if (key === this.ownKey) {
      const failed = this.ownCopied()
      return failed === undefined ? Effect.succeed(this.own) : Effect.fail(failed)
    }
    const changed = this.changed?.get(key)
    return changed !== undefined
      ? Effect.succeed(changed)
      : Eager.flatMap(this.task.get(key), (state) => Eager.fromEither(privateAggregates(state, this.copyValue)))
  }

  /** The record's own state (`get` of `ownKey`) without an Effect; `undefined` when it cannot be copied (`get` fails then). */
  ownState(): Option.Option<WindowState<A>> | undefined {
    return this.ownCopied() === undefined ? this.own : undefined
  }

  /** Makes `own` the record's private copy (once); the error when it cannot be copied. */
  private ownCopied(): EncodeError | undefined {
    if (this.ownPrivate) return undefined
    const copied = privateAggregates(this.own, this.copyValue)
    if (Either.isLeft(copied)) return copied.left
    this.own = copied.right
    this.ownPrivate = true
    return undefined
  }

  put(key: string, state: Option.Option<WindowState<A>>): void {
    if (key === this.ownKey) {
      this.own = state
      this.ownChanged = true
      this.ownPrivate = true
    } else {
      this.changed ??= new Map()
      this.changed.set(key, state)
    }
  }

  /** The task's time once loaded for this record (`loadTime`), else `undefined`. */
  loadedTime(): Time | undefined {
    return this.time
  }

  /** The task's time (loaded once per record). */
  loadTime(): Effect.Effect<Time, unknown> {
    if (this.time !== undefined) return Effect.succeed(this.time)
    const stored = this.task.get(timeKey)
    // Known (most records): at once, without a continuation made.
    if (!Eager.isDone(stored)) return Effect.flatMap(stored, (stored) => this.timeOf(stored))
    return stored._tag === "Success" ? this.timeOf(stored.value) : Exit.failCause(stored.cause)
  }

  private timeOf(stored: Option.Option<WindowState<A>>): Effect.Effect<Time> {
    if (Option.isSome(stored) && stored.value._tag !== "Time") {
      return Effect.dieMessage(`Skein invariant broken: the state key ${timeKey} holds ${stored.value._tag}`)
    }
    const time: Time = Option.isSome(stored) && stored.value._tag === "Time"
      ? stored.value
      : { _tag: "Time", streamTime: -1, observed: -1, closes: [], storeTime: -1, expiries: [] }
    this.time = time
    return Effect.succeed(time)
  }

  setTime(time: Time): void {
    this.time = time
    this.timeChanged = true
  }

  /**
   * Moves the task's stream time and observed time (loaded: `loadTime`) up to `streamTime` and
   * `observed`: the first move of a record copies the time, the next ones change that copy, which
   * nothing but this record holds until its result.
   */
  advanceTime(streamTime: number, observed: number): void {
    const time = this.time
    if (time === undefined) throw new Error("Skein invariant broken: a record moved the task's time before loading it")
    if (streamTime <= time.streamTime && observed <= time.observed) return
    const own = this.ownTime === time ? this.ownTime : { ...time }
    own.streamTime = Math.max(time.streamTime, streamTime)
    own.observed = Math.max(time.observed, observed)
    this.ownTime = own
    this.setTime(own)
  }

  /** The transform's result: the record's outputs, its own state change, and the others. */
  result(emit: ReadonlyArray<Topic.OutputRecord>): Transformer.Result<WindowState<A>> {
    const others: Array<KeyChange<WindowState<A>>> = []
    if (this.changed !== undefined) {
      for (const [key, state] of this.changed) {
        others.push({ key, state: Option.isSome(state) ? Transformer.set(state.value) : Transformer.remove })
      }
    }
    if (this.timeChanged && this.time !== undefined) others.push({ key: timeKey, state: Transformer.set(this.time) })
    if (!this.ownChanged) return { emit, others }
    return { emit, state: Option.isSome(this.own) ? Transformer.set(this.own.value) : Transformer.remove, others }
  }
}

/**
 * `state` with each of its windows' aggregates that is an object copied
 * (`copyValue`); the same `state` when it holds none (a count's numbers, the
 * task's time, an index bucket).
 */
const privateAggregates = <A>(
  state: Option.Option<WindowState<A>>,
  copyValue: (value: A) => Either.Either<A, EncodeError>
): Either.Either<Option.Option<WindowState<A>>, EncodeError> => {
  if (Option.isNone(state) || state.value._tag !== "Windows" || !holdsObjects(state.value.windows)) return Either.right(state)
  const windows = state.value.windows
  const copied: Array<Windows<A>["windows"][number]> = []
  for (const w of windows) {
    const value = copyValue(w.value)
    if (Either.isLeft(value)) return Either.left(value.left)
    copied.push(value.right === w.value ? w : { ...w, value: value.right })
  }
  return Either.right(Option.some({ ...state.value, windows: copied }))
}

/** Whether some window's aggregate is an object (a count's are numbers). */
const holdsObjects = <A>(windows: Windows<A>["windows"]): boolean => {
  for (const w of windows) if (typeof w.value === "object" && w.value !== null) return true
  return false
}

/**
 * The times (close times, expiries) at which windows are due, ascending: the task's time keeps
 * the slots (`slotMs` wide) that hold some, and each slot's state key (`{prefix}{slot}`) its
 * times. Adding a time rewrites one slot's list, and the task's time only for a new slot: the
 * lists stay short however many windows are open, where one list of every time would be
 * rewritten by every record.
 */
export interface TimeIndex {
  readonly prefix: string
  readonly slotMs: number
}

/** Adds `time` to `index`; `slots` (the task's time's list, a copy) gains its slot. */
export const addTime = <A>(
  context: RecordContext<A>,
  index: TimeIndex,
  slots: Array<number>,
  time: number
): Effect.Effect<void, unknown> => {
  const slot = Math.floor(time / index.slotMs)
  const key = `${index.prefix}${slot}`
  return Eager.map(context.get(key), (stored) => {
    const times = Option.isSome(stored) && stored.value._tag === "Times" ? stored.value.times : []
    if (!times.includes(time)) context.put(key, Option.some({ _tag: "Times", times: [...times, time].sort((a, b) => a - b) }))
    if (!slots.includes(slot)) {
      slots.push(slot)
      slots.sort((a, b) => a - b)
    }
  })
}

const noneDue: Effect.Effect<ReadonlyArray<number>> = Effect.succeed([])

/** The times of `index` at or before `upTo`, ascending, taken out of it (and their slots out of `slots`). */
export const takeDue = <A>(
  context: RecordContext<A>,
  index: TimeIndex,
  slots: Array<number>,
  upTo: number
): Effect.Effect<ReadonlyArray<number>, unknown> =>
  // Nothing due (most records): no steps.
  slots.length === 0 || slots[0]! * index.slotMs > upTo ? noneDue : Eager.gen(function*() {
    const due: Array<number> = []
    while (slots.length > 0 && slots[0]! * index.slotMs <= upTo) {
      const key = `${index.prefix}${slots[0]!}`
      const stored = yield* context.get(key)
      const times = Option.isSome(stored) && stored.value._tag === "Times" ? stored.value.times : []
      const rest = times.filter((t) => t > upTo)
      for (const t of times) if (t <= upTo) due.push(t)
      if (rest.length > 0) {
        // The slot holds later times: every later slot starts after `upTo` too.
        if (rest.length !== times.length) context.put(key, Option.some({ _tag: "Times", times: rest }))
        break
      }
      context.put(key, Option.none())
      slots.shift()
    }
    return due
  })

/** A slot width for times spread over `span` ms: about as many slots as times per slot. */
export const slotFor = (span: number): number => Math.max(1, Math.ceil(Math.sqrt(Math.max(1, span))))

/** Adds `stateKey` to the index bucket `bucketKey`. */
export const appendToBucket = <A>(context: RecordContext<A>, bucketKey: string, stateKey: string): Effect.Effect<void, unknown> =>
  Eager.map(context.get(bucketKey), (bucket) => {
    const head = Option.isSome(bucket) && bucket.value._tag === "Closing" ? bucket.value : { _tag: "Closing" as const, keys: [], chunks: 0 }
    if (head.keys.length < chunkSize) {
      context.put(bucketKey, Option.some({ ...head, keys: [...head.keys, stateKey] }))
      return
    }
    context.put(chunkKey(bucketKey, head.chunks), Option.some({ _tag: "Closing", keys: head.keys, chunks: 0 }))
    context.put(bucketKey, Option.some({ _tag: "Closing", keys: [stateKey], chunks: head.chunks + 1 }))
  })

/** The state keys of the index bucket `bucketKey`, each once, in the order they were added; the bucket is deleted. */
export const takeBucket = <A>(context: RecordContext<A>, bucketKey: string): Effect.Effect<ReadonlyArray<string>, unknown> =>
  Eager.gen(function*() {
    const bucket = yield* context.get(bucketKey)
    if (Option.isNone(bucket) || bucket.value._tag !== "Closing") return []
    const keys = new Set<string>()
    for (let n = 0; n < bucket.value.chunks; n++) {
      const chunk = yield* context.get(chunkKey(bucketKey, n))
      if (Option.isSome(chunk) && chunk.value._tag === "Closing") for (const key of chunk.value.keys) keys.add(key)
      context.put(chunkKey(bucketKey, n), Option.none())
    }
    for (const key of bucket.value.keys) keys.add(key)
    context.put(bucketKey, Option.none())
    return [...keys]
  })

/** Moves the task's stream time to `timestamp` if it is larger (every record of the sub-topology). */
export const observeStreamTime = <A>(context: RecordContext<A>, timestamp: number): Effect.Effect<void, unknown> => {
  const loaded = context.loadTime()
  // Loaded at once (most records): no continuation made.
  if (!Eager.isDone(loaded)) return Effect.map(loaded, () => context.advanceTime(timestamp, -1))
  if (loaded._tag === "Failure") return Exit.failCause(loaded.cause)
  context.advanceTime(timestamp, -1)
  return Exit.void
}

export const windowsOf = <A>(state: Option.Option<WindowState<A>>, key: string): Either.Either<Windows<A> | undefined, string> => {
  if (Option.isNone(state)) return Either.right(undefined)
  return state.value._tag === "Windows" ? Either.right(state.value) : Either.left(`the state key ${key} holds ${state.value._tag}`)
}

/**
 * Counts and logs `late` windows `record` missed; with `late: "error"` and
 * no window accepting it (`whole`), fails with `LateRecord` for the rules.
 */
/** The record's key's windows, or a new entry of none (its key's text encoded for the index). */
export const ownWindows = <A>(
  operator: Operator<A>,
  context: RecordContext<A>,
  record: Graph.StreamRecord,
  inputTopic: string
): Effect.Effect<Windows<A>, unknown> =>
  Eager.flatMap(context.get(context.ownKey), (stored): Effect.Effect<Windows<A>, unknown> => {
    const own = windowsOf(stored, context.ownKey)
    if (Either.isLeft(own)) return Effect.dieMessage(`Skein invariant broken: ${own.left}`)
    if (own.right !== undefined) return Effect.succeed(own.right)
    const keyText = operator.keyText(inputTopic).encode(record.key)
    if (Either.isLeft(keyText)) return Effect.fail(keyText.left)
    return Effect.succeed({ _tag: "Windows", key: keyText.right, topic: inputTopic, windows: [] })
  })

export const lateRecord = <A>(
  operator: Operator<A>,
  record: Graph.StreamRecord,
  observed: number,
  graceMs: number,
  late: number,
  whole: boolean
): Effect.Effect<void, LateRecord> =>
  Effect.gen(function*() {
    if (whole && operator.windowing.late === "error") {
      return yield* Effect.fail(
        new LateRecord({ operator: operator.name, timestamp: record.timestamp, streamTime: observed, graceMs })
      )
    }
    operator.late.count += late
    yield* Metric.incrementBy(operator.lateCounter, late)
    const total = operator.late.count
    if (total === late || Math.floor(total / 1_000) > Math.floor((total - late) / 1_000)) {
      yield* Effect.logWarning(
        `${operator.subTopology}: ${operator.name} dropped a record with event time ${record.timestamp} from ${late} closed ` +
          `window(s) (stream time ${observed}, grace ${graceMs} ms): ${total} late so far ` +
          `(skein_streams_late_records_total; late: "error" sends them to the rules)`
      )
    }
  })

/**
 * Aggregates `record` (keyed, with its event time) into its open windows,
 * then closes the windows the observed time has passed. `forward` passes a
 * result on (keyed by `Windowed`).
 */
export const process = <A>(
  operator: Operator<A>,
  windows: TimeWindows.TimeWindows,
  context: RecordContext<A>,
  record: Graph.StreamRecord,
  inputTopic: string,
  forward: (record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>
): Effect.Effect<void, unknown, unknown> =>
  updateOpenWindows(operator, windows, context, record) ? Exit.void : processAll(operator, windows, context, record, inputTopic, forward)

/**
 * Most records of a key (final results only): every window the record
 * belongs to is open and already holds some of the key's records, and no
 * window is due to close. Then what `processAll` does comes down to updating
 * those windows and the observed time, which this does at once, without
 * its generator; `false` (nothing done) for any other record.
 */
const updateOpenWindows = <A>(
  operator: Operator<A>,
  windows: TimeWindows.TimeWindows,
  context: RecordContext<A>,
  record: Graph.StreamRecord
): boolean => {
  if (operator.windowing.emit !== "onWindowClose") return false
  const time = context.loadedTime()
  if (time === undefined) return false
  const observed = Math.max(time.observed, record.timestamp)
  // A close time due (`takeDue`): the slots are ascending, the first is the earliest.
  const first = time.closes[0]
  if (first !== undefined && first * windows.advanceMs <= observed) return false
  const own = context.ownState()
  const entry = own !== undefined && Option.isSome(own) && own.value._tag === "Windows" ? own.value : undefined
  if (entry === undefined) return false
  const closeBefore = observed - windows.graceMs
  const starts = TimeWindows.startsFor(windows, record.timestamp)
  const at: Array<number> = []
  for (const start of starts) {
    if (start + windows.sizeMs <= closeBefore) return false
    const i = indexOfStart(entry.windows, start)
    if (i === -1) return false
    at.push(i)
  }
  if (starts.length === 0) return false
  const entryWindows = [...entry.windows]
  for (const i of at) {
    const previous = entryWindows[i]!
    entryWindows[i] = {
      start: previous.start,
      value: operator.add(Option.some(previous.value), record),
      timestamp: Math.max(previous.timestamp, record.timestamp)
    }
  }
  context.put(context.ownKey, Option.some({ ...entry, windows: entryWindows }))
  context.advanceTime(-1, observed)
  return true
}

const indexOfStart = <A>(windows: Windows<A>["windows"], start: number): number => {
  for (let i = 0; i < windows.length; i++) if (windows[i]!.start === start) return i
  return -1
}

/** `process` of any record, every step eagerly (`eager.ts`). */
const processAll = <A>(
  operator: Operator<A>,
  windows: TimeWindows.TimeWindows,
  context: RecordContext<A>,
  record: Graph.StreamRecord,
  inputTopic: string,
  forward: (record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>
): Effect.Effect<void, unknown, unknown> =>
  // Eagerly (`eager.ts`): where every state it reads is known and `forward`'s operators are synchronous, in this call.
  Eager.gen(function*() {
    const { windowing } = operator
    const { emit } = windowing
    const time = yield* context.loadTime()
    const observed = Math.max(time.observed, record.timestamp)
    const closeBefore = observed - windows.graceMs
    const entry = yield* ownWindows(operator, context, record, inputTopic)
    const entryWindows = [...entry.windows]
    const closes = [...time.closes]
    // Close times are `k * advance + size + grace`: one per slot of `advance`.
    const closeIndex: TimeIndex = { prefix: "s", slotMs: windows.advanceMs }
    let accepted = 0
    let late = 0
    for (const start of TimeWindows.startsFor(windows, record.timestamp)) {
      const end = start + windows.sizeMs
      if (end <= closeBefore) {
        late++
        continue
      }
      accepted++
      const at = entryWindows.findIndex((w) => w.start === start)
      const previous = at === -1 ? undefined : entryWindows[at]!
      const value = operator.add(previous === undefined ? Option.none() : Option.some(previous.value), record)
      const timestamp = previous === undefined ? record.timestamp : Math.max(previous.timestamp, record.timestamp)
      const updated = { start, value, timestamp }
      if (previous === undefined) {
        entryWindows.push(updated)
        const close = end + windows.graceMs
        yield* appendToBucket(context, closingKey(close), context.ownKey)
        yield* addTime(context, closeIndex, closes, close)
      } else {
        entryWindows[at] = updated
      }
      if (emit === "onWindowUpdate") {
        yield* forward({ key: Windowed.make(record.key, start, end), value, timestamp, headers: record.headers })
      }
    }
    if (accepted > 0) context.put(context.ownKey, Option.some({ ...entry, windows: entryWindows }))
    if (late > 0) yield* lateRecord(operator, record, observed, windows.graceMs, late, accepted === 0)
    // Close every window whose close time the observed time has reached, in close-time order.
    const due = yield* takeDue(context, closeIndex, closes, observed)
    for (const close of due) {
      const start = close - windows.graceMs - windows.sizeMs
      for (const key of yield* takeBucket(context, closingKey(close))) {
        const state = windowsOf(yield* context.get(key), key)
        if (Either.isLeft(state)) return yield* Effect.dieMessage(`Skein invariant broken: ${state.left}`)
        const keyWindows = state.right
        if (keyWindows === undefined) continue
        const window = keyWindows.windows.find((w) => w.start === start)
        if (window === undefined) continue
        if (emit === "onWindowClose") {
          const decoded = operator.keyText(keyWindows.topic).decode(keyWindows.key)
          if (Either.isLeft(decoded)) return yield* Effect.fail(decoded.left)
          yield* forward({
            key: Windowed.make(decoded.right, start, start + windows.sizeMs),
            value: window.value,
            timestamp: window.timestamp,
            headers: []
          })
        }
        const rest = keyWindows.windows.filter((w) => w !== window)
        context.put(key, rest.length === 0 ? Option.none() : Option.some({ ...keyWindows, windows: rest }))
      }
    }
    const latest = yield* context.loadTime()
    const slotsChanged = closes.length !== latest.closes.length || closes.some((slot, i) => slot !== latest.closes[i])
    if (observed !== latest.observed || slotsChanged) context.setTime({ ...latest, observed, closes })
  })
