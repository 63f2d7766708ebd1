/**
 * A session-window aggregation (Kafka Streams' `KStreamSessionWindowAggregate`)
 * on the task state `windowAggregate.ts` describes: each key's sessions
 * (start, aggregate, end), the task's store time (the largest session end
 * written: Kafka Streams' session store keeps a session while its end is
 * above the store time minus gap plus grace), and the index of sessions by
 * close time (`end + gap + grace`).
 *
 * A record finds its key's sessions within the gap of it, merges them with
 * itself into one session (their aggregates folded with the spec's `merge`),
 * and is added to it. A session accepts a record while the merged session's
 * end is above `observed - gap - grace`. (Kafka Streams also accepts a record
 * exactly at that bound, but its store does not keep the session it makes:
 * it emits an update for a session it then forgets, and, suppressed, a final
 * result, twice when that window had one already. Skein counts such a record
 * as late.)
 *
 * @internal
 */
import { Effect, Either, Option } from "effect"
import * as Eager from "./eager.ts"
import type { SessionWindows } from "../../SessionWindows.ts"
import * as Windowed from "../../Windowed.ts"
import type * as Graph from "./graph.ts"
import type { Operator, RecordContext, Windows } from "./windowAggregate.ts"
import type { TimeIndex } from "./windowAggregate.ts"
import { addTime, appendToBucket, closingKey, lateRecord, slotFor, takeBucket, takeDue, windowsOf } from "./windowAggregate.ts"

/** A session as kept: its start, aggregate and end (the `timestamp` of a window entry). */
interface Session<A> {
  readonly start: number
  readonly value: A
  readonly timestamp: number
}

export const process = <A>(
  operator: Operator<A>,
  windows: SessionWindows,
  context: RecordContext<A>,
  record: Graph.StreamRecord,
  inputTopic: string,
  forward: (record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>
): Effect.Effect<void, unknown, unknown> =>
  // Eagerly (`eager.ts`): where every state it reads is known and `forward`'s operators are synchronous, in this call.
  Eager.gen(function*() {
    const session = operator.session
    if (session === undefined) return yield* Effect.dieMessage("Skein invariant broken: a session aggregation without its merge")
    const gap = windows.inactivityGapMs
    const grace = windows.graceMs
    const retention = gap + grace
    const emitUpdates = operator.windowing.emit === "onWindowUpdate"
    const ts = record.timestamp
    const time = yield* context.loadTime()
    const observed = Math.max(time.observed, ts)
    const closeTime = observed - grace - gap
    const own = windowsOf(yield* context.get(context.ownKey), context.ownKey)
    if (Either.isLeft(own)) return yield* Effect.dieMessage(`Skein invariant broken: ${own.left}`)
    const sessions: ReadonlyArray<Session<A>> = own.right?.windows ?? []
    // The store's findSessions: visible sessions ending at or after ts - gap and starting at or before ts + gap, by end.
    const liveFrom = Math.max(0, time.storeTime - retention + 1)
    const found = sessions
      .filter((s) => s.timestamp >= liveFrom && s.timestamp >= ts - gap && s.start <= ts + gap)
      .sort((a, b) => a.timestamp - b.timestamp || a.start - b.start)
    let aggregate = session.initial()
    let start = ts
    let end = ts
    for (const s of found) {
      aggregate = session.merge(aggregate, s.value)
      start = Math.min(start, s.start)
      end = Math.max(end, s.timestamp)
    }
    if (end <= closeTime) {
      // Kafka Streams drops it below the bound, and at the bound makes a session its store does not keep.
      return yield* lateRecord(operator, record, observed, grace + gap, 1, true)
    }
    let entry: Windows<A>
    if (own.right === undefined) {
      const keyText = operator.keyText(inputTopic).encode(record.key)
      if (Either.isLeft(keyText)) return yield* Effect.fail(keyText.left)
      entry = { _tag: "Windows", key: keyText.right, topic: inputTopic, windows: [] }
    } else {
      entry = own.right
    }
    let kept = [...sessions]
    if (found.length > 0 && !(start === ts && end === ts)) {
      for (const s of found) {
        kept = kept.filter((k) => k !== s)
        if (emitUpdates) {
          yield* forward({ key: Windowed.make(record.key, s.start, s.timestamp), value: null, timestamp: s.timestamp, headers: record.headers })
        }
      }
    }
    const value = operator.add(aggregate, record)
    const existed = kept.some((k) => k.start === start && k.timestamp === end)
    kept = [...kept.filter((k) => !(k.start === start && k.timestamp === end)), { start, value, timestamp: end }]
      .sort((a, b) => a.start - b.start)
    context.put(context.ownKey, Option.some({ ...entry, windows: kept }))
    if (emitUpdates) {
      yield* forward({ key: Windowed.make(record.key, start, end), value, timestamp: end, headers: record.headers })
    }
    const closes = [...time.closes]
    const closeIndex: TimeIndex = { prefix: "s", slotMs: slotFor(retention) }
    if (!existed) {
      const close = end + gap + grace
      yield* appendToBucket(context, closingKey(close), context.ownKey)
      yield* addTime(context, closeIndex, closes, close)
    }
    // Close the sessions whose end + gap + grace the observed time has reached: final results, and deletion
    // (the store's retention ends there too).
    for (const close of yield* takeDue(context, closeIndex, closes, observed)) {
      const sessionEnd = close - gap - grace
      for (const key of yield* takeBucket(context, closingKey(close))) {
        const state = windowsOf(yield* context.get(key), key)
        if (Either.isLeft(state)) return yield* Effect.dieMessage(`Skein invariant broken: ${state.left}`)
        const keySessions = state.right
        if (keySessions === undefined) continue
        const closing = keySessions.windows.filter((s) => s.timestamp === sessionEnd)
        if (closing.length === 0) continue
        if (!emitUpdates) {
          const decoded = operator.keyText(keySessions.topic).decode(keySessions.key)
          if (Either.isLeft(decoded)) return yield* Effect.fail(decoded.left)
          for (const s of closing) {
            yield* forward({ key: Windowed.make(decoded.right, s.start, s.timestamp), value: s.value, timestamp: s.timestamp, headers: [] })
          }
        }
        const rest = keySessions.windows.filter((s) => s.timestamp !== sessionEnd)
        context.put(key, rest.length === 0 ? Option.none() : Option.some({ ...keySessions, windows: rest }))
      }
    }
    const latest = yield* context.loadTime()
    context.setTime({ ...latest, observed, closes, storeTime: Math.max(latest.storeTime, end) })
  })
