/**
 * A task's timers and stream time (see `Timer.ts`), kept in the task's own
 * store under Skein's reserved keys and changelogged with its state:
 *
 * - `\u0000skein.timer.["{state key}","{name}"]`: a scheduled timer, as JSON.
 * - `\u0000skein.stream-time`: the task's stream time.
 *
 * `TimerTable` is the task's committed view, in memory (loaded from the
 * store at the task's first batch, updated after each commit); `Pending` is
 * one batch's view on top of it: what the batch's units (records, fired
 * timers) scheduled, cancelled and fired, as writes that commit with the
 * units that made them (`Cut.Done.taskWrites`).
 *
 * Pure but for the store read in `load`.
 *
 * @internal
 */
import { Effect, Either, Schema } from "effect"
import type { ParseResult } from "effect"
import type { StateStoreError } from "../../SkeinError.ts"
import { StoredStateInvalid } from "../../SkeinError.ts"
import type * as Timer from "../../Timer.ts"
import type { InputRecord } from "../../Transformer.ts"
import type { StateStore } from "../stores/StateStore.ts"

/** Keys of a task's store that are Skein's own, never a transformer's state key. */
export const reservedPrefix = "\u0000skein."
/** The store key of the task's stream time. */
export const streamTimeKey = `${reservedPrefix}stream-time`
const timerPrefix = `${reservedPrefix}timer.`
/** The store key of timer `name` of state key `key`. */
export const timerKey = (key: string, name: string): string => `${timerPrefix}${JSON.stringify([key, name])}`

/** True when `stateKey` lies in Skein's reserved key space. */
export const isReserved = (stateKey: string): boolean => stateKey.charCodeAt(0) === 0 && stateKey.startsWith(reservedPrefix)

/** The transformers whose records move stream time by their event time (`withEventTime`). */
const eventTimes = new WeakMap<object, (record: InputRecord<unknown, unknown>) => number>()

/**
 * Marks `transformer`: its records move its tasks' stream time by
 * `eventTime` of the record (the stream DSL's timestamp extractors), not by
 * their Kafka timestamp. A negative or non-finite event time leaves it.
 */
export const withEventTime = <T extends object>(transformer: T, eventTime: (record: InputRecord<unknown, unknown>) => number): T => {
  eventTimes.set(transformer, eventTime)
  return transformer
}

/** How a record of `transformer` moves stream time (`withEventTime`); `undefined`: by its timestamp. */
export const eventTimeOf = (transformer: object): ((record: InputRecord<unknown, unknown>) => number) | undefined =>
  eventTimes.get(transformer)

/** A scheduled timer of a state key. */
export interface Entry extends Timer.Timer {
  readonly key: string
}

const EntryJson = Schema.parseJson(Schema.Struct({
  key: Schema.String,
  name: Schema.String,
  domain: Schema.Literal("stream-time", "wall-clock"),
  at: Schema.Number
}))
const decodeEntry = Schema.decodeEither(EntryJson)
const StreamTimeJson = Schema.parseJson(Schema.Number)
const decodeStreamTime = Schema.decodeEither(StreamTimeJson)

const encodeEntry = (entry: Entry): string =>
  JSON.stringify({ key: entry.key, name: entry.name, domain: entry.domain, at: entry.at })

/** A write of a unit (a record, a fired timer) to the task's timers or stream time, as stored and as applied. */
export type Write =
  | { readonly _tag: "Timer"; readonly key: string; readonly value: string | null; readonly entry: Entry | null }
  | { readonly _tag: "StreamTime"; readonly key: string; readonly value: string; readonly time: number }

/** The times below which no timer of a domain is due: lower bounds (`Infinity`: none). */
type Bounds = Record<Timer.Domain, number>

/** A task's committed timers and stream time, in memory. */
export interface TimerTable {
  /** False until the task's first batch has read its timers from the store. */
  loaded: boolean
  /** The task's stream time (-1 before any record with a timestamp). */
  streamTime: number
  readonly entries: Map<string, Entry>
  /** Per domain, a time at or below the earliest timer's: nothing is due before it. */
  readonly next: Bounds
}

/** An empty table, not loaded yet. */
export const makeTable = (): TimerTable => ({
  loaded: false,
  streamTime: -1,
  entries: new Map(),
  next: { "stream-time": Number.POSITIVE_INFINITY, "wall-clock": Number.POSITIVE_INFINITY }
})

/** Adds a committed entry (or the stream time) read from the store or written by a commit. */
const put = (table: TimerTable, storeKey: string, entry: Entry): void => {
  table.entries.set(storeKey, entry)
  table.next[entry.domain] = Math.min(table.next[entry.domain], entry.at)
}

/**
 * When the task needs a batch for its timers: at once until they are read
 * (a restart's due timers fire without a record), then at its earliest
 * wall-clock timer (a lower bound: the batch that finds none due tightens
 * it). Stream-time timers need no batch of their own: records move stream time.
 */
export const wakeAt = (table: TimerTable): number => table.loaded ? table.next["wall-clock"] : Number.NEGATIVE_INFINITY

/** Applies committed writes, in commit order. */
export const commit = (table: TimerTable, writes: ReadonlyArray<Write>): void => {
  for (const write of writes) {
    if (write._tag === "StreamTime") table.streamTime = Math.max(table.streamTime, write.time)
    else if (write.entry === null) table.entries.delete(write.key)
    else put(table, write.key, write.entry)
  }
}

/** Reads the task's timers and stream time from its store into `table` (once; a page at a time). */
export const load = (
  table: TimerTable,
  store: StateStore,
  where: { readonly transformer: string; readonly partition: number }
): Effect.Effect<void, StateStoreError | StoredStateInvalid> =>
  Effect.gen(function*() {
    if (table.loaded) return
    const invalid = (key: string) => (cause: ParseResult.ParseError) =>
      new StoredStateInvalid({ transformer: where.transformer, kind: "state", key, partition: where.partition, store: store.path, cause })
    const time = yield* store.get(streamTimeKey)
    if (time !== undefined) table.streamTime = yield* Either.mapLeft(decodeStreamTime(time), invalid(streamTimeKey))
    let after: string | undefined = undefined
    for (;;) {
      const page: ReadonlyArray<readonly [string, string]> = yield* store.entries(timerPrefix, { after, limit: 1000 })
      for (const [key, value] of page) put(table, key, yield* Either.mapLeft(decodeEntry(value), invalid(key)))
      if (page.length < 1000) break
      after = page[page.length - 1]![0]
    }
    table.loaded = true
  })

/** Why `changes` cannot be scheduled (a time that is not a finite number), or `undefined`. */
export const invalidChange = (changes: ReadonlyArray<Timer.Change>): string | undefined => {
  for (const change of changes) {
    if (change._tag === "Schedule" && !Number.isFinite(change.timer.at)) {
      return `timer "${change.timer.name}" is scheduled at ${change.timer.at}: a timer's time must be a finite number of ` +
        "epoch milliseconds (a record's timestamp or Clock.currentTimeMillis plus a delay)"
    }
  }
  return undefined
}

/** Orders due timers: by time, then state key, then name. */
export const order = (a: Entry, b: Entry): number =>
  a.at - b.at || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

/**
 * One batch's timers: the committed table with the batch's changes on top.
 * Its writes are applied to the table only once their units commit.
 */
export class Pending {
  private readonly overlay = new Map<string, Entry | null>()
  private readonly next: Bounds
  streamTime: number

  constructor(private readonly table: TimerTable) {
    this.streamTime = table.streamTime
    this.next = { ...table.next }
  }

  /** The timer `name` of `key` as the batch left it. */
  get(key: string, name: string): Entry | undefined {
    const storeKey = timerKey(key, name)
    const changed = this.overlay.get(storeKey)
    if (changed !== undefined) return changed ?? undefined
    return this.table.entries.get(storeKey)
  }

  /** True when `entry` is still scheduled as it was (not moved, cancelled or fired since). */
  current(entry: Entry): boolean {
    const now = this.get(entry.key, entry.name)
    return now !== undefined && now.at === entry.at && now.domain === entry.domain
  }

  /** Applies a unit's changes to the timers of `key`; returns their writes. */
  apply(key: string, changes: ReadonlyArray<Timer.Change>): Array<Write> {
    const writes: Array<Write> = []
    for (const change of changes) {
      if (change._tag === "Cancel") {
        if (this.get(key, change.name) !== undefined) writes.push(this.set(timerKey(key, change.name), null))
        continue
      }
      const { at, domain, name } = change.timer
      const entry: Entry = { key, name, domain, at }
      writes.push(this.set(timerKey(key, name), entry))
      this.next[domain] = Math.min(this.next[domain], at)
    }
    return writes
  }

  /** Removes a timer that fires; returns its write. */
  remove(entry: Entry): Write {
    return this.set(timerKey(entry.key, entry.name), null)
  }

  /** Moves stream time to `time` when later; returns its write. */
  advance(time: number): Write | undefined {
    if (!(time > this.streamTime)) return undefined
    this.streamTime = time
    return { _tag: "StreamTime", key: streamTimeKey, value: String(time), time }
  }

  /**
   * The timers of `domain` due at `now` (at or before it), in order. Scans
   * only when the lower bound says one may be due; the scan tightens the
   * bounds (the batch's, and the table's for its committed entries).
   */
  due(domain: Timer.Domain, now: number): Array<Entry> {
    if (now < this.next[domain]) return []
    const due: Array<Entry> = []
    let later = Number.POSITIVE_INFINITY
    let committed = Number.POSITIVE_INFINITY
    const visit = (entry: Entry) => {
      if (entry.domain !== domain) return
      if (entry.at <= now) due.push(entry)
      else later = Math.min(later, entry.at)
    }
    for (const [storeKey, entry] of this.table.entries) {
      if (entry.domain === domain) committed = Math.min(committed, entry.at)
      if (!this.overlay.has(storeKey)) visit(entry)
    }
    for (const entry of this.overlay.values()) if (entry !== null) visit(entry)
    this.table.next[domain] = committed
    this.next[domain] = later
    return due.sort(order)
  }

  private set(storeKey: string, entry: Entry | null): Write {
    this.overlay.set(storeKey, entry)
    return { _tag: "Timer", key: storeKey, value: entry === null ? null : encodeEntry(entry), entry }
  }
}
