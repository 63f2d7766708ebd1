/**
 * The cut of a task's batch: what of a partially processed batch commits.
 *
 * Processing may end early (a record failed, or a grace period ran out and
 * running handlers were interrupted). Per input partition, the cut is its
 * first record that did not finish (in any lane); the records below it are
 * kept, with their outputs and final states, and nothing at or past it.
 *
 * Pure: no Kafka, no store.
 *
 * @internal
 */
import type { Option } from "effect"
import type { EncodedRecord } from "../Topic.ts"
import type { StoreWrite } from "./StateStore.ts"
import type * as Timers from "./timers.ts"

/**
 * The stored form of a change that is made once the batch ends, from the key's last kept
 * change (`storedAtEnd.ts`): Skein's own bookkeeping, storable by construction.
 */
export const AtEnd: unique symbol = Symbol.for("skein/cut/AtEnd")
export type AtEnd = typeof AtEnd

/** What a finished record produced. */
export interface Done<S> {
  readonly offset: number
  readonly stateKey: string
  readonly outputs: ReadonlyArray<EncodedRecord>
  /** `undefined`: the state was not changed; otherwise the new state (`None`: deleted). */
  readonly change: Option.Option<S> | undefined
  /**
   * The new state as stored (`null`: deleted), checked to decode back; `undefined` without a change or a codec;
   * `AtEnd`: stored as the batch ends.
   */
  readonly encoded?: string | null | AtEnd | undefined
  readonly disposition: "processed" | "skipped" | "deadLettered"
  /** Changes to other state keys of the task (`Result.others`), applied after `change`. */
  readonly others?: ReadonlyArray<OtherChange<S>> | undefined
  /** The run (execution id) of a skipped or dead-lettered record of a durable workflow: its steps are deleted. */
  readonly run?: string | undefined
  /** Writes to the task's timers and stream time (a transformer with timers), applied after `others`. */
  readonly taskWrites?: ReadonlyArray<Timers.Write> | undefined
  /** Timers fired in this unit (after the record, or the timer itself). */
  readonly fired?: number | undefined
  /** Writes to the transformer's named stores, in order, applied after `taskWrites`. */
  readonly storeWrites?: ReadonlyArray<StoreWrite> | undefined
}

/** A change to another state key of the task, as `Done.change` and `Done.encoded` are for the record's own. */
export interface OtherChange<S> {
  readonly key: string
  readonly change: Option.Option<S>
  readonly encoded: string | null | AtEnd | undefined
}

/** Records run one after the other, and those of them that finished (a prefix). */
export interface Lane<S> {
  readonly offsets: ReadonlyArray<number>
  readonly done: ReadonlyArray<Done<S>>
}

/** One input partition's records in the batch, run in one lane or several (key concurrency). */
export interface SliceProgress<S> {
  /** Offsets of the slice's records, ascending. */
  readonly offsets: ReadonlyArray<number>
  /** The offset to commit once every record of the slice is processed. */
  readonly endOffset: number
  readonly lanes: ReadonlyArray<Lane<S>>
}

/** Per slice: the next offset to commit and how many of its records are kept. */
export interface SliceCut {
  readonly offset: number
  readonly kept: number
}

export interface Cut<S> {
  /** Outputs of the kept records, slice by slice, lane by lane (or in the order given), in processing order. */
  readonly outputs: ReadonlyArray<EncodedRecord>
  /** The final state per key reached by the kept records. */
  readonly states: ReadonlyMap<string, Option.Option<S>>
  /** The same final states as stored (`null`: deleted), for the keys whose records encoded them. */
  readonly encoded: ReadonlyMap<string, string | null>
  /** The keys whose last kept change is stored as the batch ends (`AtEnd`): their state is in `states`. */
  readonly atEnd: ReadonlySet<string>
  readonly cuts: ReadonlyArray<SliceCut>
  readonly processed: number
  readonly skipped: number
  readonly deadLettered: number
  /** The runs of the kept records that were skipped or dead-lettered. */
  readonly disposedRuns: ReadonlyArray<string>
  /** The kept writes to the task's timers and stream time, in order (also in `encoded`). */
  readonly taskWrites: ReadonlyArray<Timers.Write>
  /** Timers fired by the kept units. */
  readonly fired: number
}

/**
 * The cut of every slice, and what the kept units produced: first `before`
 * (timers fired as the batch began, all finished ones kept), then the kept
 * records of each slice; or, given `order` (a task processing its inputs in
 * timestamp order, one lane per slice: `taskOrder.ts`), the kept records in
 * that order: the slice of each finished unit, in the order they ran, so
 * that outputs and the last change of each key follow processing order.
 */
export const cut = <S>(
  slices: ReadonlyArray<SliceProgress<S>>,
  before: ReadonlyArray<Done<S>> = [],
  order?: ReadonlyArray<number>
): Cut<S> => {
  const outputs: Array<EncodedRecord> = []
  const states = new Map<string, Option.Option<S>>()
  const encoded = new Map<string, string | null>()
  const atEnd = new Set<string>()
  /** The key's last kept change as stored, or stored at the end. */
  const store = (key: string, value: string | null | AtEnd): void => {
    if (value === AtEnd) {
      encoded.delete(key)
      atEnd.add(key)
    } else {
      encoded.set(key, value)
      atEnd.delete(key)
    }
  }
  const disposedRuns: Array<string> = []
  const cuts: Array<SliceCut> = []
  const taskWrites: Array<Timers.Write> = []
  let processed = 0
  let skipped = 0
  let deadLettered = 0
  let fired = 0
  /** What a kept unit produced, but its counts. */
  const keep = (done: Done<S>): void => {
    for (const output of done.outputs) outputs.push(output)
    if (done.change !== undefined) {
      states.set(done.stateKey, done.change)
      if (done.encoded !== undefined) store(done.stateKey, done.encoded)
    }
    if (done.others !== undefined) {
      for (const other of done.others) {
        states.set(other.key, other.change)
        if (other.encoded !== undefined) store(other.key, other.encoded)
      }
    }
    if (done.taskWrites !== undefined) {
      for (const write of done.taskWrites) {
        store(write.key, write.value)
        taskWrites.push(write)
      }
    }
    if (done.storeWrites !== undefined) for (const write of done.storeWrites) store(write.key, write.value)
    fired += done.fired ?? 0
  }
  /** A finished record below its slice's cut, with its counts. */
  const keepRecord = (done: Done<S>): void => {
    keep(done)
    processed++
    if (done.disposition === "skipped") skipped++
    else if (done.disposition === "deadLettered") deadLettered++
    if (done.run !== undefined) disposedRuns.push(done.run)
  }
  for (const done of before) keep(done)
  const offsets = slices.map((slice) => {
    let offset = slice.endOffset
    for (const lane of slice.lanes) {
      const unfinished = lane.offsets[lane.done.length]
      if (unfinished !== undefined) offset = Math.min(offset, unfinished)
    }
    return offset
  })
  if (order === undefined) {
    slices.forEach((slice, i) => {
      for (const lane of slice.lanes) {
        for (const done of lane.done) {
          if (done.offset >= offsets[i]!) break
          keepRecord(done)
        }
      }
    })
  } else {
    const next = slices.map(() => 0)
    for (const i of order) {
      const done = slices[i]?.lanes[0]?.done[next[i]!++]
      if (done !== undefined && done.offset < offsets[i]!) keepRecord(done)
    }
  }
  slices.forEach((slice, i) => {
    const offset = offsets[i]!
    let kept = 0
    while (kept < slice.offsets.length && slice.offsets[kept]! < offset) kept++
    cuts.push({ offset, kept })
  })
  return { outputs, states, encoded, atEnd, cuts, processed, skipped, deadLettered, disposedRuns, taskWrites, fired }
}
