/**
 * Timestamp order across a task's inputs (Kafka Streams' `PartitionGroup`
 * and `max.task.idle.ms`, KIP-353 and KIP-695).
 *
 * A task reading several input partitions (partition p of each of its
 * topics: a join's stream and table) takes its next record from the input
 * whose first buffered record has the smallest timestamp, so a table update
 * written before a stream record (in event time) is applied before the
 * stream record is joined. While an input has nothing buffered the task
 * cannot know what that input holds next: it waits, unless the input is
 * known to be caught up (its end offset reached) and has stayed so for
 * `maxTaskIdle` (default 0: no wait once caught up); then it goes ahead
 * without it ("enforced processing", counted). An input whose lag is not
 * known, or known to be above 0, is waited for: its records are on the broker
 * and are being fetched.
 *
 * Pure: timestamps, counts and clocks in, decisions out.
 *
 * @internal
 */
import type * as Topic from "../../Topic.ts"
import type { Transformer } from "../../Transformer.ts"

/**
 * Whether a transformer's tasks process their inputs in timestamp order: it
 * reads several topics and runs each input partition's records one after the
 * other (no key concurrency, which runs records of different keys at once).
 */
export const applies = <Inputs extends ReadonlyArray<Topic.Any>, S, E, R>(transformer: Transformer<Inputs, S, E, R>): boolean => {
  if (transformer.inputs.length < 2) return false
  const sequential = transformer.sharedState === true || transformer.onTimer !== undefined || (transformer.stores ?? []).length > 0
  return sequential || transformer.inputs.every((topic) => !topic.keyConcurrency)
}

/**
 * The order in which a task processes its inputs' records: at each step the
 * input whose next record has the smallest timestamp (ties: the input listed
 * first), each input's records in offset order. Returns the input index of
 * each step; all records of every input are ordered.
 */
export const merge = (timestamps: ReadonlyArray<ReadonlyArray<number>>): ReadonlyArray<number> => {
  const next = timestamps.map(() => 0)
  const order: Array<number> = []
  for (;;) {
    const input = smallestHead(timestamps, next)
    if (input === undefined) return order
    order.push(input)
    next[input]!++
  }
}

/** The input whose next record has the smallest timestamp (the first listed on a tie), or none left. */
const smallestHead = (timestamps: ReadonlyArray<ReadonlyArray<number>>, next: ReadonlyArray<number>): number | undefined => {
  let best: number | undefined
  let bestTime = Number.POSITIVE_INFINITY
  for (let i = 0; i < timestamps.length; i++) {
    const time = timestamps[i]![next[i]!]
    if (time === undefined) continue
    if (best === undefined || time < bestTime) {
      best = i
      bestTime = time
    }
  }
  return best
}

/** One input of a task as a batch is formed. */
export interface Buffered {
  /** Timestamps of the input's records the batch may take, in offset order. */
  readonly timestamps: ReadonlyArray<number>
  /**
   * Once those records are taken, may the task go on without this input?
   * True when it is idle (caught up, `maxTaskIdle` passed); false when more
   * of it is buffered than the batch was offered, or it is to be waited for.
   */
  readonly mayRunDry: boolean
}

/** What a batch of a task takes: how many records of each input, and how many of them went ahead of a dry input. */
export interface Plan {
  readonly taken: ReadonlyArray<number>
  /**
   * Records taken while an input had none left (it may run dry): Kafka
   * Streams' enforced processing, where a record of that input produced
   * later may still carry an earlier timestamp.
   */
  readonly enforced: number
}

/**
 * How many records of each input a batch takes, at most `max` in all: the
 * records in `merge` order, up to the first step at which an input that may
 * not run dry has no record left (as Kafka Streams checks before each
 * record that every input has a record buffered, or may be idle). Every
 * input that may not run dry and has no record: nothing is taken.
 */
export const plan = (inputs: ReadonlyArray<Buffered>, max: number): Plan => {
  const taken = inputs.map(() => 0)
  const timestamps = inputs.map((input) => input.timestamps)
  let total = 0
  let enforced = 0
  while (total < max) {
    let dry = false
    let blocked = false
    for (let i = 0; i < inputs.length; i++) {
      if (taken[i]! < inputs[i]!.timestamps.length) continue
      if (inputs[i]!.mayRunDry) dry = true
      else blocked = true
    }
    if (blocked) break
    const input = smallestHead(timestamps, taken)
    if (input === undefined) break
    taken[input]!++
    total++
    if (dry) enforced++
  }
  return { taken, enforced }
}

/** What a task knows of an input partition with nothing buffered. */
export type Lag =
  /** No fetch or end offset told it yet: wait while it is looked up. */
  | "unknown"
  /** Records are on the broker past its position: wait for the fetch to bring them. */
  | "behind"
  /** Its position is its end offset: the task may go on without it once `maxTaskIdle` has passed. */
  | "caught-up"

/** One input partition of a task, as its readiness sees it. */
export interface InputState {
  /** The input's `topic` (deadlines are kept per input). */
  readonly topic: string
  readonly buffered: number
  /** Read only when nothing is buffered. */
  readonly lag: Lag
}

/** Whether a task may start a batch now. */
export type Readiness =
  /** Every input has records buffered: processing in timestamp order. */
  | { readonly _tag: "Ready" }
  /** Some inputs have none but are idle past `maxTaskIdle`: the task goes on without them (their records may come out of order). */
  | { readonly _tag: "Enforced"; readonly idle: ReadonlyArray<string> }
  /**
   * The task waits: for the inputs whose lag is unknown (`lookup`: to be
   * looked up), or behind, or for an idle deadline (`until`, epoch ms) to
   * pass. Nothing buffered at all is also `Waiting` (there is nothing to do).
   */
  | { readonly _tag: "Waiting"; readonly lookup: ReadonlyArray<string>; readonly until: number | undefined }

/**
 * Kafka Streams' `PartitionGroup.readyToProcess`: every input with records
 * buffered is ready; an empty one with unknown or positive lag holds the task;
 * an empty, caught-up one holds it until its idle deadline (set when it is
 * first seen so: `now + maxTaskIdle`), after which the task goes on without
 * it. `deadlines` (per input topic) is the task's state across calls: an
 * input with records, or not caught up, loses its deadline.
 * `maxTaskIdle` `"no-wait"` (Kafka Streams' -1): ready whenever anything is buffered.
 */
export const readiness = (
  inputs: ReadonlyArray<InputState>,
  deadlines: Map<string, number>,
  now: number,
  maxTaskIdle: number | "no-wait"
): Readiness => {
  const anything = inputs.some((input) => input.buffered > 0)
  if (maxTaskIdle === "no-wait") return anything ? { _tag: "Ready" } : { _tag: "Waiting", lookup: [], until: undefined }
  const lookup: Array<string> = []
  const idle: Array<string> = []
  let behind = false
  let until: number | undefined
  for (const input of inputs) {
    if (input.buffered > 0) {
      deadlines.delete(input.topic)
      continue
    }
    if (input.lag !== "caught-up") {
      deadlines.delete(input.topic)
      if (input.lag === "unknown") lookup.push(input.topic)
      behind = true
      continue
    }
    let deadline = deadlines.get(input.topic)
    if (deadline === undefined) {
      deadline = now + maxTaskIdle
      deadlines.set(input.topic, deadline)
    }
    if (now < deadline) until = until === undefined ? deadline : Math.min(until, deadline)
    else idle.push(input.topic)
  }
  if (!anything || behind || until !== undefined) return { _tag: "Waiting", lookup, until: behind ? undefined : until }
  return idle.length === 0 ? { _tag: "Ready" } : { _tag: "Enforced", idle }
}
