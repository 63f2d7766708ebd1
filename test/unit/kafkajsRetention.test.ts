/**
 * kafkajs as patched keeps no fetched batch alive past its use.
 *
 * Skein holds each fetched record until a task processes it; kafkajs's own copy of the batch (every
 * message it decoded) must not live on beside it. Two places kept it: the fetcher's loop, whose
 * suspended frame held the last fetch's batches while it awaited the next fetch, and the eachBatch
 * handler's `isStale`, a closure sharing its scope with those that use the batch. Each test runs the
 * original and the patched file side by side: a batch the original keeps reachable, the patch lets
 * the collector take (a `WeakRef` to it, after a full collection).
 */
import { assert, describe, it } from "@effect/vitest"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { silentLogger, type KafkajsCopy } from "../helpers/kafkajsCopies.ts"
import { sideBySide } from "../helpers/kafkajsSideBySide.ts"

v8.setFlagsFromString("--expose-gc")
const collect = vm.runInNewContext("gc") as () => void

const copies = sideBySide()

/** A new macrotask: a `WeakRef` made in this job is kept until the job ends. */
const nextTask = () => new Promise<void>((resolve) => setImmediate(resolve))

/** Whether what `ref` points to survives a full collection. */
const survives = async (ref: WeakRef<object>): Promise<boolean> => {
  await nextTask()
  collect()
  await nextTask()
  collect()
  return ref.deref() !== undefined
}

interface Fetcher {
  readonly start: () => Promise<void>
  readonly stop: () => Promise<void>
}

type CreateFetcher = (options: Record<string, unknown>) => Fetcher

/**
 * A fetcher whose first fetch returns one batch and whose next one waits until stopped: whether
 * that batch survives once its worker handled it, while the fetcher waits for the next fetch.
 */
const fetcherKeepsBatch = async (copy: KafkajsCopy): Promise<boolean> => {
  const createFetcher = copy.load("src/consumer/fetcher.js") as CreateFetcher
  const createWorkerQueue = copy.load("src/consumer/workerQueue.js") as (options: { workers: ReadonlyArray<unknown> }) => unknown
  const createWorker = copy.load("src/consumer/worker.js") as (options: { handler: (batch: unknown) => Promise<void>; workerId: number }) => unknown
  let handled: () => void = () => {}
  const handledOnce = new Promise<void>((resolve) => {
    handled = resolve
  })
  const workerQueue = createWorkerQueue({ workers: [createWorker({ handler: async () => handled(), workerId: 0 })] })
  let fetches = 0
  let ref: WeakRef<object> | undefined
  let release: (batches: ReadonlyArray<unknown>) => void = () => {}
  const fetcher = createFetcher({
    nodeId: 1,
    workerQueue,
    partitionAssignments: new Map(),
    logger: silentLogger(),
    fetch: () => {
      fetches++
      if (fetches === 1) {
        const batch = { topic: "t", partition: 0, messages: new Array(1_000).fill({ offset: "0" }) }
        ref = new WeakRef(batch)
        return Promise.resolve([batch])
      }
      return new Promise<ReadonlyArray<unknown>>((resolve) => {
        release = resolve
      })
    }
  })
  const running = fetcher.start()
  await handledOnce
  // The worker handled the batch; the fetcher now waits for its next fetch.
  while (fetches < 2) await nextTask()
  const kept = await survives(ref!)
  const stopping = fetcher.stop()
  release([])
  await Promise.all([running, stopping])
  return kept
}

interface RunnerLike {
  readonly processEachBatch: (batch: unknown) => Promise<void>
}

/**
 * A runner handing one batch to an eachBatch handler that keeps `isStale` (as Skein's buffer does
 * until the batch's records are processed): whether the batch survives once the handler returned.
 */
const isStaleKeepsBatch = async (copy: KafkajsCopy): Promise<{ readonly kept: boolean; readonly stale: boolean }> => {
  const Runner = copy.load("src/consumer/runner.js") as new(options: Record<string, unknown>) => RunnerLike
  let isStale: (() => boolean) | undefined
  const runner = new Runner({
    logger: silentLogger(),
    consumerGroup: {
      hasSeekOffset: () => true,
      resolveOffset: () => {},
      pause: () => {},
      resume: () => {}
    },
    instrumentationEmitter: { emit: () => {} },
    eachBatch: async (payload: { readonly isStale: () => boolean }) => {
      isStale = payload.isStale
    }
  })
  let ref: WeakRef<object> | undefined
  await (async () => {
    const messages = new Array(1_000).fill({ offset: "0" })
    const batch = { topic: "t", partition: 0, messages, lastOffset: () => "0", isEmpty: () => false }
    ref = new WeakRef(batch)
    await runner.processEachBatch(batch)
  })()
  const kept = await survives(ref!)
  return { kept, stale: isStale?.() === true }
}

describe("kafkajs patch: no fetched batch kept past its use", () => {
  it("the fetcher lets go of a fetch's batches while it waits for the next fetch", async () => {
    assert.isTrue(await fetcherKeepsBatch(copies.original), "kafkajs as published keeps the last fetch's batch (the test's premise)")
    assert.isFalse(await fetcherKeepsBatch(copies.patched), "the patched fetcher must not keep a handled batch alive")
  })

  it("an eachBatch handler that keeps isStale does not keep the batch", async () => {
    const original = await isStaleKeepsBatch(copies.original)
    assert.isTrue(original.kept, "kafkajs as published keeps the batch through isStale (the test's premise)")
    const patched = await isStaleKeepsBatch(copies.patched)
    assert.isFalse(patched.kept, "the patched runner's isStale must not keep the batch alive")
    assert.isTrue(patched.stale, "isStale still asks the consumer group")
  })
})
