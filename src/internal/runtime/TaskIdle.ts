/**
 * The runner's side of timestamp-ordered consumption (`taskOrder.ts`): what
 * it knows of each input partition's lag, each task's idle deadlines, and
 * the batch a multi-input task may take now.
 *
 * Lag, as Kafka Streams reads it from each fetch: a fetched batch that ends
 * at its partition's high watermark tells the partition is caught up; for an
 * empty input whose lag is not known (no fetch told it: kafkajs reports no
 * empty fetch, or its last batch ended before the high watermark, which
 * under read_committed may be an open transaction) the end offset is looked
 * up (ListOffsets, read_committed: the last stable offset), once at a time
 * per partition, and the loop is woken with the answer. A lookup that fails
 * counts the partition as caught up (logged): a task is never held by a
 * lookup it cannot make. A known positive lag is looked up again after
 * `behindRefresh`. The loop is also woken when an idle deadline passes
 * (`maxTaskIdle` above 0).
 *
 * Only a task waits: its own inputs hold it, never another task's.
 *
 * @internal
 */
import { Clock, Duration, Effect, FiberHandle, FiberSet } from "effect"
import type { Scope } from "effect"
import type { KafkaError } from "../../SkeinError.ts"
import { describe } from "../util/errorText.ts"
import * as PollBuffer from "./PollBuffer.ts"
import * as TaskOrder from "./taskOrder.ts"

/** How long a known positive lag of an empty input is trusted before its end offset is looked up again. */
const behindRefresh = 1_000

/** A task's batch as ordered: the slices to process and the records that went ahead of a dry input. */
export interface OrderedBatch {
  readonly slices: ReadonlyArray<PollBuffer.PollSlice>
  readonly enforced: number
}

export interface TaskIdle {
  /** A fetched batch of `topic`/`partition` was buffered: where it ended and the partition's high watermark then. */
  readonly fetched: (topic: string, partition: number, nextOffset: number, highWatermark: number, now: number) => void
  /** May task `partition` (with records buffered) start a batch now? Notes the lookups and wakeups its wait needs. */
  readonly ready: (partition: number, now: number) => boolean
  /** The records of `slices` (task `partition`'s, as taken from the buffer) it processes now, in timestamp order's prefix. */
  readonly order: (partition: number, slices: ReadonlyArray<PollBuffer.PollSlice>, max: number, now: number) => OrderedBatch
  /** A new assignment: the tasks' idle deadlines start over. */
  readonly reset: () => void
  /** Starts the lookups and the wakeup the waiting tasks need (after each dispatch). */
  readonly kick: Effect.Effect<void>
}

export interface Options {
  readonly inputs: ReadonlyArray<string>
  /** `maxTaskIdle` in milliseconds, or `"no-wait"`. */
  readonly maxTaskIdle: number | "no-wait"
  readonly buffer: PollBuffer.PollBuffer
  /** The end offset (read_committed) of an input partition. */
  readonly endOffset: (topic: string, partition: number) => Effect.Effect<number, KafkaError>
  /** Wakes the runner's loop (a lookup answered, a deadline passed). */
  readonly wake: Effect.Effect<void>
}

const keyOf = (topic: string, partition: number) => `${topic}\u0000${partition}`

export const make = (options: Options): Effect.Effect<TaskIdle, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { buffer, inputs, maxTaskIdle } = options
    /** Per input partition: its end offset as last known, and when it was learned. */
    const ends = new Map<string, { readonly end: number; readonly at: number }>()
    const looking = new Set<string>()
    /** The lookups the waiting tasks need, started by `kick`. */
    const wanted = new Map<string, { readonly topic: string; readonly partition: number }>()
    /** Per task: its inputs' idle deadlines (`taskOrder.readiness`). */
    const deadlines = new Map<number, Map<string, number>>()
    /** The earliest idle deadline a waiting task needs a wakeup at. */
    let wakeAt: number | undefined
    let armedAt: number | undefined
    const lookups = yield* FiberSet.make<void>()
    const timer = yield* FiberHandle.make<void>()

    const lagOf = (topic: string, partition: number, now: number): TaskOrder.Lag => {
      const position = buffer.position(topic, partition)
      const known = ends.get(keyOf(topic, partition))
      if (position === undefined || known === undefined) return "unknown"
      if (position >= known.end) return "caught-up"
      return now - known.at > behindRefresh ? "unknown" : "behind"
    }

    const deadlinesOf = (partition: number): Map<string, number> => {
      const found = deadlines.get(partition)
      if (found !== undefined) return found
      const made = new Map<string, number>()
      deadlines.set(partition, made)
      return made
    }

    const ready = (partition: number, now: number): boolean => {
      const states = inputs.map((topic) => ({
        topic,
        buffered: buffer.buffered(topic, partition),
        lag: lagOf(topic, partition, now)
      }))
      const readiness = TaskOrder.readiness(states, deadlinesOf(partition), now, maxTaskIdle)
      if (readiness._tag !== "Waiting") return true
      for (const topic of readiness.lookup) wanted.set(keyOf(topic, partition), { topic, partition })
      const wakeups = readiness.until === undefined ? [] : [readiness.until]
      // An input known to be behind is looked up again once that knowledge is `behindRefresh` old: woken then.
      for (const state of states) {
        const known = ends.get(keyOf(state.topic, partition))
        if (state.buffered === 0 && state.lag === "behind" && known !== undefined) wakeups.push(known.at + behindRefresh + 1)
      }
      for (const at of wakeups) wakeAt = wakeAt === undefined ? at : Math.min(wakeAt, at)
      return false
    }

    /** May the task go on once `topic`'s records offered to this batch are taken (Kafka Streams' check before each record)? */
    const mayRunDry = (topic: string, partition: number, offered: number, now: number): boolean => {
      if (maxTaskIdle === "no-wait") return true
      if (offered < buffer.buffered(topic, partition)) return false
      if (lagOf(topic, partition, now) !== "caught-up") return false
      // An input that had records has no deadline yet: it is set at now, as the readiness check would.
      const deadline = deadlinesOf(partition).get(topic) ?? now + maxTaskIdle
      return deadline <= now
    }

    const order = (
      partition: number,
      slices: ReadonlyArray<PollBuffer.PollSlice>,
      max: number,
      now: number
    ): OrderedBatch => {
      const byTopic = new Map(slices.map((slice) => [slice.parts[0]!.cursor.batch.topic, slice]))
      const plan = TaskOrder.plan(
        inputs.map((topic) => {
          const slice = byTopic.get(topic)
          const timestamps = slice === undefined ? [] : timestampsOf(slice)
          return { timestamps, mayRunDry: mayRunDry(topic, partition, timestamps.length, now) }
        }),
        max
      )
      const ordered: Array<PollBuffer.PollSlice> = []
      inputs.forEach((topic, i) => {
        const slice = byTopic.get(topic)
        const taken = plan.taken[i]!
        if (slice !== undefined && taken > 0) ordered.push(trim(slice, taken))
      })
      return { slices: ordered, enforced: maxTaskIdle === "no-wait" ? 0 : plan.enforced }
    }

    const lookup = (key: string, topic: string, partition: number): Effect.Effect<void> =>
      options.endOffset(topic, partition).pipe(
        Effect.matchCauseEffect({
          onSuccess: (end) =>
            Effect.map(Clock.currentTimeMillis, (at) => {
              ends.set(key, { end, at })
            }),
          onFailure: (cause) =>
            Effect.zipRight(
              Effect.map(Clock.currentTimeMillis, (at) => {
                // Counted as caught up: the task goes on (enforced) rather than wait on a lookup it cannot make.
                ends.set(key, { end: -1, at })
              }),
              Effect.logWarning(
                `the end offset of ${topic}/${partition} could not be read (${describe(cause)}): ` +
                  "its task goes on without waiting for it (its records may be processed out of timestamp order)"
              )
            )
        }),
        Effect.ensuring(Effect.sync(() => looking.delete(key))),
        Effect.zipRight(options.wake)
      )

    const kick: Effect.Effect<void> = Effect.gen(function*() {
      for (const [key, { partition, topic }] of wanted) {
        if (looking.has(key)) continue
        looking.add(key)
        yield* FiberSet.run(lookups, lookup(key, topic, partition))
      }
      wanted.clear()
      const at = wakeAt
      wakeAt = undefined
      if (at === undefined || (armedAt !== undefined && armedAt <= at)) return
      armedAt = at
      yield* FiberHandle.run(
        timer,
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sleep(Duration.millis(Math.max(0, at - now)))).pipe(
          Effect.zipRight(Effect.sync(() => {
            armedAt = undefined
          })),
          Effect.zipRight(options.wake)
        )
      )
    })

    return {
      fetched: (topic, partition, nextOffset, highWatermark, now) => {
        const key = keyOf(topic, partition)
        // Ended at the high watermark: caught up as of this fetch. Before it: unknown (under read_committed the
        // high watermark may be past an open transaction the fetch cannot read): looked up if the task waits for it.
        if (nextOffset >= highWatermark) ends.set(key, { end: highWatermark, at: now })
        else ends.delete(key)
      },
      ready,
      order,
      reset: () => deadlines.clear(),
      kick
    }
  })

/** The timestamps of a slice's records, in offset order. */
const timestampsOf = (slice: PollBuffer.PollSlice): ReadonlyArray<number> => {
  const timestamps: Array<number> = []
  for (const { cursor, end } of slice.parts) {
    for (let i = cursor.index; i < end; i++) timestamps.push(cursor.batch.records[i]!.timestamp)
  }
  return timestamps
}

/** The first `count` records of a slice. */
const trim = (slice: PollBuffer.PollSlice, count: number): PollBuffer.PollSlice => {
  const parts: Array<PollBuffer.SlicePart> = []
  let remaining = count
  for (const part of slice.parts) {
    if (remaining === 0) break
    const step = Math.min(remaining, part.end - part.cursor.index)
    parts.push({ cursor: part.cursor, end: part.cursor.index + step })
    remaining -= step
  }
  return { parts }
}
