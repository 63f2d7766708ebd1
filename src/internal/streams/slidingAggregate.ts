/**
 * A sliding-window aggregation (Kafka Streams' `KStreamSlidingWindowAggregate`,
 * its reverse-iterator path, and its path for records earlier than the time
 * difference), on the task state `windowAggregate.ts` describes.
 *
 * Windows are `[start, start + d]`, inclusive at both ends. Each key's
 * windows are kept as Kafka Streams' in-memory window store keeps them: a
 * window is visible while its start is above the store's time (the largest
 * start written in the task) minus the retention (`2d + grace`), and a write
 * to a window past it is skipped. A window accepts updates while its end is
 * at or above `observed - grace` (its end is inclusive), so it closes, and
 * its final result is emitted, once the observed time passes `end + grace`;
 * it is deleted when it expires.
 *
 * @internal
 */
import { Effect, Either, Option } from "effect"
import * as Eager from "./eager.ts"
import type { SlidingWindows } from "../../SlidingWindows.ts"
import * as Windowed from "../../Windowed.ts"
import type * as Graph from "./graph.ts"
import type { Operator, RecordContext } from "./windowAggregate.ts"
import type { TimeIndex } from "./windowAggregate.ts"
import { addTime, appendToBucket, closingKey, expiringKey, lateRecord, ownWindows, slotFor, takeBucket, takeDue, windowsOf } from "./windowAggregate.ts"

interface Stored<A> {
  readonly start: number
  readonly value: A
  readonly timestamp: number
}

export const process = <A>(
  operator: Operator<A>,
  windows: SlidingWindows,
  context: RecordContext<A>,
  record: Graph.StreamRecord,
  inputTopic: string,
  forward: (record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>
): Effect.Effect<void, unknown, unknown> =>
  // Eagerly (`eager.ts`): where every state it reads is known and `forward`'s operators are synchronous, in this call.
  Eager.gen(function*() {
    const d = windows.timeDifferenceMs
    const grace = windows.graceMs
    const retention = 2 * d + grace
    const emitUpdates = operator.windowing.emit === "onWindowUpdate"
    const ts = record.timestamp
    const time = yield* context.loadTime()
    const observed = Math.max(time.observed, ts)
    const closeTime = observed - grace
    if (ts + d < closeTime) {
      // Every window of the record has closed (Kafka Streams' check, before any window is read).
      return yield* lateRecord(operator, record, observed, grace, 1, true)
    }
    const entry = yield* ownWindows(operator, context, record, inputTopic)
    let storeTime = time.storeTime
    const byStart = new Map<number, Stored<A>>(entry.windows.map((w) => [w.start, w]))
    const closes = [...time.closes]
    const expiries = [...time.expiries]
    const closeIndex: TimeIndex = { prefix: "s", slotMs: slotFor(retention) }
    const expiryIndex: TimeIndex = { prefix: "y", slotMs: slotFor(retention) }
    let late = 0
    let changed = false

    const visible = (start: number) => start >= storeTime - retention + 1
    /** The key's visible windows with a start in `[from, to]`, ascending (the store's fetch). */
    const fetch = (from: number, to: number): Array<Stored<A>> =>
      [...byStart.values()].filter((w) => w.start >= from && w.start <= to && visible(w.start)).sort((a, b) => a.start - b.start)

    /** The store's put: skipped for a start already expired; a new window is indexed by its close time. */
    const put = (start: number, value: A, timestamp: number): Effect.Effect<void, unknown> => {
      storeTime = Math.max(storeTime, start)
      if (start <= storeTime - retention) return Effect.void
      const existed = byStart.has(start) && visible(start)
      byStart.set(start, { start, value, timestamp })
      changed = true
      if (existed) return Effect.void
      const close = start + d + grace + 1
      // Each step built where it runs: the helpers are eager (`eager.ts`).
      return Eager.flatMap(appendToBucket(context, closingKey(close), context.ownKey), () => addTime(context, closeIndex, closes, close))
    }

    const emitUpdate = (start: number, value: A, timestamp: number) =>
      emitUpdates
        ? forward({ key: Windowed.make(record.key, start, start + d), value, timestamp, headers: record.headers })
        : Effect.void

    /** Kafka Streams' updateWindowAndForward: `previous` is the window's aggregate before the record (`None`: empty). */
    const update = (start: number, previous: Option.Option<A>, previousTimestamp: number): Effect.Effect<void, unknown, unknown> => {
      if (start + d < closeTime) {
        late++
        return Effect.void
      }
      const value = operator.add(previous, record)
      const timestamp = Option.isNone(previous) ? ts : Math.max(ts, previousTimestamp)
      return Eager.flatMap(put(start, value, timestamp), () => emitUpdate(start, value, timestamp))
    }

    /** The record's right window, a copy of the aggregate of the records after it (no close check, as in Kafka Streams). */
    const createRightWindow = (aggregate: Stored<A>) =>
      Eager.flatMap(put(ts + 1, aggregate.value, aggregate.timestamp), () => emitUpdate(ts + 1, aggregate.value, aggregate.timestamp))

    if (ts < d) {
      // processEarly: records before `d` share the window [0, d].
      let combined: Stored<A> | undefined
      let right: Stored<A> | undefined
      let rightCreated = false
      let previous: number | undefined
      const starts = new Set<number>()
      for (const w of fetch(0, ts + 1)) {
        starts.add(w.start)
        if (w.start === 0) {
          combined = w
          if (w.timestamp < ts) previous = w.timestamp
        } else if (w.start <= ts) {
          right = w
          yield* update(w.start, Option.some(w.value), w.timestamp)
        } else if (w.start === ts + 1) {
          rightCreated = true
        }
      }
      if (right === undefined && combined !== undefined && combined.timestamp > ts) right = combined
      if (!rightCreated && right !== undefined && right.timestamp > ts) yield* createRightWindow(right)
      if (previous !== undefined && !starts.has(previous + 1)) yield* update(previous + 1, Option.none(), ts)
      yield* combined === undefined ? update(0, Option.none(), ts) : update(0, Option.some(combined.value), combined.timestamp)
    } else {
      // processReverse: the key's windows from the latest start down.
      const starts = new Set<number>()
      let left: Stored<A> | undefined
      let right: Stored<A> | undefined
      let leftCreated = false
      let rightCreated = false
      let previous: number | undefined
      let done = false
      const candidates = fetch(Math.max(0, ts - 2 * d), ts + 1).reverse()
      for (const w of candidates) {
        starts.add(w.start)
        const end = w.start + d
        if (w.start === ts + 1) {
          rightCreated = true
        } else if (end > ts) {
          if (right === undefined) right = w
          yield* update(w.start, Option.some(w.value), w.timestamp)
        } else if (end === ts) {
          leftCreated = true
          yield* update(w.start, Option.some(w.value), w.timestamp)
          if (w.timestamp < ts) {
            previous = w.timestamp
          } else {
            done = true
            break
          }
        } else {
          left = w
          previous = w.timestamp
          break
        }
      }
      if (!done) {
        // createWindows
        if (previous !== undefined) {
          const previousRightStart = previous + 1
          if (!starts.has(previousRightStart) && previousRightStart + d >= ts) yield* update(previousRightStart, Option.none(), ts)
        }
        if (!leftCreated) {
          const notEmpty = previous !== undefined && ts - d <= previous && left !== undefined
          yield* update(ts - d, notEmpty && left !== undefined ? Option.some(left.value) : Option.none(), ts)
        }
        if (!rightCreated && right !== undefined && right.timestamp > ts) yield* createRightWindow(right)
      }
    }

    if (changed) {
      // Expired windows stay until their expiry bucket's turn: one that has not closed yet still emits its final result.
      const kept = [...byStart.values()].sort((a, b) => a.start - b.start)
      context.put(context.ownKey, kept.length === 0 ? Option.none() : Option.some({ ...entry, windows: kept }))
    }
    if (late > 0) yield* lateRecord(operator, record, observed, grace, late, false)

    // Close the windows whose end + grace the observed time has passed: final results, then expiry once past retention.
    for (const close of yield* takeDue(context, closeIndex, closes, observed)) {
      const start = close - 1 - grace - d
      for (const key of yield* takeBucket(context, closingKey(close))) {
        const state = windowsOf(yield* context.get(key), key)
        if (Either.isLeft(state)) return yield* Effect.dieMessage(`Skein invariant broken: ${state.left}`)
        const window = state.right?.windows.find((w) => w.start === start)
        if (state.right === undefined || window === undefined) continue
        if (!emitUpdates) {
          const decoded = operator.keyText(state.right.topic).decode(state.right.key)
          if (Either.isLeft(decoded)) return yield* Effect.fail(decoded.left)
          yield* forward({ key: Windowed.make(decoded.right, start, start + d), value: window.value, timestamp: window.timestamp, headers: [] })
        }
        yield* appendToBucket(context, expiringKey(start + retention), key)
        yield* addTime(context, expiryIndex, expiries, start + retention)
      }
    }
    for (const expiry of yield* takeDue(context, expiryIndex, expiries, storeTime)) {
      for (const key of yield* takeBucket(context, expiringKey(expiry))) {
        const state = windowsOf(yield* context.get(key), key)
        if (Either.isLeft(state)) return yield* Effect.dieMessage(`Skein invariant broken: ${state.left}`)
        if (state.right === undefined) continue
        const kept = state.right.windows.filter((w) => visible(w.start))
        if (kept.length !== state.right.windows.length) {
          context.put(key, kept.length === 0 ? Option.none() : Option.some({ ...state.right, windows: kept }))
        }
      }
    }
    const latest = yield* context.loadTime()
    context.setTime({ ...latest, observed, closes, storeTime, expiries })
  })
