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
import type { EncodedRecord } from "../../Topic.ts"
import type { StoreWrite } from "../stores/StateStore.ts"
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
 * What kept units add up to, each kept in the order given: outputs in
 * order, the last change of each key, and the counts.
 */
class Keeper<S> {
  readonly outputs: Array<EncodedRecord> = []
  readonly states = new Map<string, Option.Option<S>>()
  readonly encoded = new Map<string, string | null>()
  readonly atEnd = new Set<string>()
  readonly disposedRuns: Array<string> = []
  readonly taskWrites: Array<Timers.Write> = []
  processed = 0
  skipped = 0
  deadLettered = 0
  fired = 0

  /** The key's last kept change as stored, or stored at the end. */
  private store(key: string, value: string | null | AtEnd): void {
    if (value === AtEnd) {
      this.encoded.delete(key)
      this.atEnd.add(key)
    } else {
      this.encoded.set(key, value)
      // Most batches store nothing at the end: no lookup a change then.
      if (this.atEnd.size > 0) this.atEnd.delete(key)
    }
  }

  /** What a kept unit produced, but its counts. */
  keep(done: Done<S>): void {
    for (const output of done.outputs) this.outputs.push(output)
    if (done.change !== undefined) {
      this.states.set(done.stateKey, done.change)
      if (done.encoded !== undefined) this.store(done.stateKey, done.encoded)
    }
    if (done.others !== undefined) {
      for (const other of done.others) {
        this.states.set(other.key, other.change)
        if (other.encoded !== undefined) this.store(other.key, other.encoded)
      }
    }
    if (done.taskWrites !== undefined) {
      for (const write of done.taskWrites) {
        this.store(write.key, write.value)
        this.taskWrites.push(write)
      }
    }
    if (done.storeWrites !== undefined) for (const write of done.storeWrites) this.store(write.key, write.value)
    this.fired += done.fired ?? 0
  }

  /** A finished record below its slice's cut, with its counts. */
  keepRecord(done: Done<S>): void {
    this.keep(done)
    this.processed++
    if (done.disposition === "skipped") this.skipped++
    else if (done.disposition === "deadLettered") this.deadLettered++
    if (done.run !== undefined) this.disposedRuns.push(done.run)
  }

  /** The cut, given each slice's next offset to commit and its records' offsets. */
  result(slices: ReadonlyArray<{ readonly offsets: ReadonlyArray<number> }>, offsets: ReadonlyArray<number>): Cut<S> {
    const cuts: Array<SliceCut> = slices.map((slice, i) => {
      const offset = offsets[i]!
      let kept = 0
      while (kept < slice.offsets.length && slice.offsets[kept]! < offset) kept++
      return { offset, kept }
    })
    const { atEnd, deadLettered, disposedRuns, encoded, fired, outputs, processed, skipped, states, taskWrites } = this
    return { outputs, states, encoded, atEnd, cuts, processed, skipped, deadLettered, disposedRuns, taskWrites, fired }
  }
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
  const keeper = new Keeper<S>()
  for (const done of before) keeper.keep(done)
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
          keeper.keepRecord(done)
        }
      }
    })
  } else {
    const next = slices.map(() => 0)
    for (const i of order) {
      const done = slices[i]?.lanes[0]?.done[next[i]!++]
      if (done !== undefined && done.offset < offsets[i]!) keeper.keepRecord(done)
    }
  }
  return keeper.result(slices, offsets)
}

/**
 * A cut kept as the batch runs, for a batch whose records run one after
 * another (each slice in one lane, the slices one after another or merged
 * in one lane): there every finished record is below its slice's cut, so
 * each finished unit is kept as it finishes, in processing order, and
 * nothing of it is held until the batch ends but what it adds to the
 * cut (its outputs, its keys' last changes).
 */
export interface Folded<S> {
  /** Keeps a finished record's unit. */
  readonly keepRecord: (done: Done<S>) => void
  /** The cut, given each slice's records' offsets, its end offset, and how many of its records finished (a prefix). */
  readonly cut: (
    slices: ReadonlyArray<{ readonly offsets: ReadonlyArray<number>; readonly endOffset: number; readonly finished: number }>
  ) => Cut<S>
}

/** A cut kept as the batch runs (`Folded`), `before` kept first. */
export const folded = <S>(before: ReadonlyArray<Done<S>>): Folded<S> => {
  const keeper = new Keeper<S>()
  for (const done of before) keeper.keep(done)
  return {
    keepRecord: (done) => keeper.keepRecord(done),
    cut: (slices) => keeper.result(slices, slices.map((slice) => slice.offsets[slice.finished] ?? slice.endOffset))
  }
}
