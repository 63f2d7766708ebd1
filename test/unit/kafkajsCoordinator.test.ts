/**
 * Skein's kafkajs patch (`consumer/consumerGroup.js`): a heartbeat whose group coordinator cannot
 * be reached (its broker crashed) looks the coordinator up again and heartbeats the new one.
 * kafkajs as published heartbeated the dead broker until the consumer's retries ran out and it
 * crashed (the chaos run's apps, ECONNREFUSED to the killed broker), while the coordinator had
 * moved to a live broker. Each test runs kafkajs as published and as patched side by side (see
 * `test/helpers/kafkajsCopies.ts`) on fake brokers; test/broker-cluster.test.ts kills a real one.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { copyKafkajs, silentLogger } from "../helpers/kafkajsCopies.ts"
import type { KafkajsCopy } from "../helpers/kafkajsCopies.ts"

const originalCopy = copyKafkajs("original")
const patchedCopy = copyKafkajs("patched")
afterAll(() => {
  originalCopy.remove()
  patchedCopy.remove()
})

interface FakeBroker {
  readonly nodeId: number
  readonly heartbeats: Array<unknown>
  readonly heartbeat: (payload: unknown) => Promise<void>
}

type ConsumerGroupClass = new(options: Record<string, unknown>) => {
  coordinator: FakeBroker
  memberId: string
  generationId: number
  heartbeat: (options: { readonly interval: number }) => Promise<void>
}

const noLogger = silentLogger()

/**
 * A member of a group whose coordinator (node 1) refuses connections; `lookup` is the cluster's
 * answer when asked for the coordinator again (node 2 is live).
 */
const member = (copy: KafkajsCopy, lookup: () => Promise<number>) => {
  const ConsumerGroup = copy.load("src/consumer/consumerGroup.js") as ConsumerGroupClass
  const { KafkaJSConnectionError } = copy.load("src/errors.js") as {
    KafkaJSConnectionError: new(message: string, options: { broker: string; code: string }) => Error
  }
  const refused = new KafkaJSConnectionError("Connection error: connect ECONNREFUSED 127.0.0.1:44693", {
    broker: "127.0.0.1:44693",
    code: "ECONNREFUSED"
  })
  const broker = (nodeId: number, fails: boolean): FakeBroker => {
    const heartbeats: Array<unknown> = []
    return {
      nodeId,
      heartbeats,
      heartbeat: async (payload) => {
        heartbeats.push(payload)
        if (fails) throw refused
      }
    }
  }
  const dead = broker(1, true)
  const live = broker(2, false)
  const lookups: Array<number> = []
  const cluster = {
    findGroupCoordinatorMetadata: async () => {
      const nodeId = await lookup()
      lookups.push(nodeId)
      return { coordinator: { nodeId } }
    },
    findBroker: async ({ nodeId }: { readonly nodeId: number }) => {
      if (nodeId === 1) throw refused
      return live
    }
  }
  const group = new ConsumerGroup({
    cluster,
    groupId: "app",
    topics: ["in"],
    logger: noLogger,
    instrumentationEmitter: { emit: () => {} },
    retry: { retries: 0 }
  })
  group.coordinator = dead
  group.memberId = "member-1"
  group.generationId = 3
  return { group, dead, live, lookups, refused }
}

describe("kafkajs patch: the group coordinator's broker is gone", () => {
  it("a heartbeat looks the coordinator up again and heartbeats it (kafkajs kept heartbeating the dead broker)", async () => {
    const original = member(originalCopy, async () => 2)
    const failed = await original.group.heartbeat({ interval: 0 }).then(() => undefined, (error: unknown) => error)
    assert.strictEqual(failed, original.refused, "kafkajs fails the heartbeat with the refused connection")
    assert.strictEqual(original.group.coordinator, original.dead, "and keeps the dead coordinator for the next one")
    assert.deepStrictEqual(original.lookups, [])

    const patched = member(patchedCopy, async () => 2)
    await patched.group.heartbeat({ interval: 0 })
    assert.deepStrictEqual(patched.lookups, [2], "one coordinator lookup")
    assert.strictEqual(patched.group.coordinator, patched.live)
    assert.deepStrictEqual(patched.live.heartbeats, [{ groupId: "app", memberId: "member-1", groupGenerationId: 3 }])
    // The next heartbeat goes to the new coordinator directly.
    await patched.group.heartbeat({ interval: 0 })
    assert.strictEqual(patched.live.heartbeats.length, 2)
    assert.strictEqual(patched.dead.heartbeats.length, 1)
  })

  it("while no live coordinator is known, the heartbeat fails with the retriable connection error", async () => {
    // The cluster still names the dead node (not yet fenced), then has no coordinator at all.
    for (const lookup of [async () => 1, async () => Promise.reject(new Error("no broker answered"))]) {
      const patched = member(patchedCopy, lookup)
      const failed = await patched.group.heartbeat({ interval: 0 }).then(() => undefined, (error: unknown) => error)
      assert.strictEqual(failed, patched.refused, "the original error, which the consumer's retries retry")
      assert.isTrue((failed as { readonly retriable?: unknown }).retriable)
    }
  })
})
