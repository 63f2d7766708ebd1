/**
 * Fault injection over a time window: SIGKILLs of app instances (restarted
 * after a short pause), SIGKILLs inside an open transaction (found by event,
 * not by chance: see `killInTransaction`), bounces (a clean SIGTERM stop and
 * restart, or an extra instance joining the group and leaving it again),
 * pauses (SIGSTOP past the session timeout, then SIGCONT: the instance comes
 * back as a zombie whose tasks have moved and must be fenced; for an app with a
 * `PauseHook`, frozen inside an open database transaction and thawed once a
 * newer owner took its partitions over), and SIGKILLs of brokers of a local
 * cluster (restarted after a pause, one at a time).
 */
import { Duration, Effect, Fiber, Option } from "effect"
import kafkajs from "kafkajs"
import type { LocalKafka } from "../../src/testing/index.ts"
import type { AppSpec, Fleet, Instance } from "./instances.ts"
import type { WireClient } from "./wire.ts"

export interface FaultPlan {
  readonly kills: number
  readonly bounces: number
  readonly brokerKills: number
  /** SIGKILLs of a group's instances while one of its transactions is open (see `killInTransaction`). */
  readonly transactionKills: number
  /** SIGSTOP for `pauseFor`, then SIGCONT. */
  readonly pauses: number
  readonly pauseFor: Duration.Duration
  /** The faults are spread over this window (from now). */
  readonly window: Duration.Duration
}

/**
 * Pauses of an app whose transactions are in a database (a `DatabaseSink`): the instance is
 * frozen at a moment it holds a transaction open that its epoch check will reject (rows written,
 * offsets not yet), and thawed (after `pauseFor` at least) once newer owners claimed its
 * partitions: a zombie whose late transaction must be rejected.
 */
export interface PauseHook {
  /** Whether the frozen instance holds such a transaction open (else it is thawed and looked at again). */
  readonly holdsTransaction: (instance: Instance) => Effect.Effect<boolean>
  /** Taken when it froze: an effect telling whether every partition it held has a newer owner since. */
  readonly takenOver: (instance: Instance) => Effect.Effect<Effect.Effect<boolean>>
}

export interface FaultCounts {
  /** Per app (`AppSpec.app`). */
  readonly kills: Map<string, number>
  readonly bounces: Map<string, number>
  readonly pauses: Map<string, number>
  brokerKills: number
  /** Kills that hit an instance holding tasks (likely inside a transaction). */
  killsOfActive: number
  /** Transaction kills whose open transaction the log shows aborted (the new owner fenced it). */
  transactionKillsAborted: number
  /** Pauses (with a `PauseHook`) that froze an instance inside an open database transaction, per app. */
  readonly pausesInTransaction: Map<string, number>
  readonly errors: Array<string>
}

export type Random = () => number

const between = (random: Random, low: number, high: number) => low + random() * (high - low)

const pick = <A>(random: Random, items: ReadonlyArray<A>): A | undefined => items[Math.floor(random() * items.length)]

const hasTasks = (instance: Instance) => {
  const assigned = instance.lastStatus?.["assigned"]
  return Array.isArray(assigned) && assigned.length > 0
}

const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1)

/**
 * Waits (up to 60 s) until no partition of the cluster has `nodeId` as its
 * leader, as the surviving brokers' metadata says; true once none has.
 */
const leadershipsMoved = (cluster: LocalKafka.LocalKafkaCluster, nodeId: number): Effect.Effect<boolean> =>
  Effect.promise(async () => {
    const brokers = cluster.nodes.filter((n) => n.nodeId !== nodeId).map((n) => n.address)
    const admin = new kafkajs.Kafka({ clientId: "chaos-faults", brokers, logLevel: kafkajs.logLevel.NOTHING }).admin()
    const deadline = Date.now() + 60_000
    try {
      await admin.connect()
      while (Date.now() < deadline) {
        const led = await admin.fetchTopicMetadata().then(
          ({ topics }) => topics.some((topic) => topic.partitions.some((p) => p.leader === nodeId)),
          () => true // no answer yet from the survivors: ask again
        )
        if (!led) return true
        await new Promise((resolve) => setTimeout(resolve, 250))
      }
      return false
    } finally {
      await admin.disconnect().catch(() => undefined)
    }
  })

/**
 * Runs the plan; returns when every fault has been injected and every
 * instance it took down has been started again.
 */
export const run = (params: {
  readonly fleet: Fleet
  readonly specs: ReadonlyArray<AppSpec>
  /** The topics a group writes in transactions (output, changelog), for `killInTransaction`. */
  readonly transactionalTopics: (spec: AppSpec) => ReadonlyArray<string>
  readonly wire: WireClient
  readonly cluster: Option.Option<LocalKafka.LocalKafkaCluster>
  readonly plan: FaultPlan
  /** How an app's pauses freeze and thaw, when not plainly for `pauseFor` (see `PauseHook`). */
  readonly pauseHook?: (spec: AppSpec) => PauseHook | undefined
  readonly random: Random
  readonly say: (line: string) => Effect.Effect<void>
}): Effect.Effect<FaultCounts> =>
  Effect.gen(function*() {
    const { fleet, random, say, plan } = params
    const counts: FaultCounts = {
      kills: new Map(),
      bounces: new Map(),
      pauses: new Map(),
      brokerKills: 0,
      killsOfActive: 0,
      transactionKillsAborted: 0,
      pausesInTransaction: new Map(),
      errors: []
    }
    const windowMs = Duration.toMillis(plan.window)
    const started = Date.now()
    const at = (ms: number) => Effect.suspend(() => Effect.sleep(Duration.millis(Math.max(0, started + ms - Date.now()))))
    const background: Array<Fiber.RuntimeFiber<void>> = []
    const later = (effect: Effect.Effect<void>) =>
      Effect.tap(Effect.fork(effect), (fiber) => Effect.sync(() => background.push(fiber)))

    const kill = Effect.gen(function*() {
      const running = fleet.running()
      const active = running.filter(hasTasks)
      const victim = pick(random, active.length > 0 ? active : running)
      if (victim === undefined) return yield* say("kill: no running instance")
      if (hasTasks(victim)) counts.killsOfActive++
      bump(counts.kills, victim.spec.app)
      yield* say(`SIGKILL ${victim.id} (${victim.runtime}, up ${((Date.now() - victim.startedAt) / 1000).toFixed(1)} s)`)
      yield* fleet.kill(victim)
      yield* later(Effect.sleep(Duration.millis(between(random, 300, 3000))).pipe(Effect.zipRight(fleet.start(victim))))
    })

    /** Instances frozen by a pause (`killInTransaction` leaves them alone). */
    const paused = new Set<Instance>()

    /** An open transaction seen while its writers were frozen: the offset it starts at. */
    interface Open {
      readonly topic: string
      readonly partition: number
      readonly from: number
    }

    /** The partitions of `topics` whose last stable offset is below the high watermark. */
    const openTransactions = (topics: ReadonlyArray<string>) =>
      Effect.map(
        Effect.forEach(topics, (topic) =>
          Effect.map(params.wire.ends(topic), (ends) =>
            ends.filter((e) => e.lastStableOffset < e.highWatermark).map((e): Open => ({
              topic,
              partition: e.partition,
              from: e.lastStableOffset
            })))),
        (lists) => lists.flat()
      )

    /**
     * Freezes (SIGSTOP) every running instance of `spec`'s group and looks for
     * an open transaction on the group's topics: one that no frozen process can
     * end any more. None: thaws them and looks again a moment later, up to a
     * guard of 90 s. Returns the frozen instances and what was open.
     */
    const freezeInTransaction = (spec: AppSpec) =>
      Effect.gen(function*() {
        const topics = params.transactionalTopics(spec)
        const deadline = Date.now() + 90_000
        let looks = 0
        while (Date.now() < deadline) {
          looks++
          const group = fleet.running().filter((i) => i.spec.label === spec.label && !paused.has(i))
          const frozen: Array<Instance> = []
          for (const instance of group) if (yield* fleet.freeze(instance)) frozen.push(instance)
          const open = frozen.length === 0 ? [] : yield* Effect.orElseSucceed(openTransactions(topics), () => [])
          if (open.length > 0) return Option.some({ frozen, open, looks })
          for (const instance of frozen) yield* fleet.thaw(instance)
          yield* Effect.sleep(Duration.millis(between(random, 50, 250)))
        }
        return Option.none()
      })

    /** Waits until the transaction that was open at `open.from` is decided, and reads how it ended. */
    const outcomeOf = (open: Open) =>
      Effect.gen(function*() {
        const deadline = Date.now() + 90_000
        while (Date.now() < deadline) {
          const ends = yield* Effect.orElseSucceed(params.wire.ends(open.topic), () => [])
          const end = ends.find((e) => e.partition === open.partition)
          if (end !== undefined && end.lastStableOffset > open.from) {
            const log = yield* Effect.either(params.wire.readFrom(open.topic, open.partition, open.from))
            return log._tag === "Right" ? log.right.firstTransaction : "unreadable"
          }
          yield* Effect.sleep(Duration.millis(200))
        }
        return "still open after 90 s"
      })

    /**
     * A SIGKILL inside an open transaction, by event rather than chance: the
     * group's instances are frozen while one of its transactions is open (see
     * `freezeInTransaction`), then killed and restarted; the transaction must
     * end aborted (the new owner's fencing, or the transaction timeout). A
     * transaction whose commit was already decided when they froze (its markers
     * in flight) ends committed: then again, up to 5 times.
     */
    const killInTransaction = Effect.gen(function*() {
      const spec = pick(random, params.specs)
      if (spec === undefined) return
      for (let attempt = 1; attempt <= 5; attempt++) {
        const found = yield* freezeInTransaction(spec)
        if (Option.isNone(found)) {
          counts.errors.push(`transaction kill: no open transaction of ${spec.label} seen within 90 s`)
          return
        }
        const { frozen, looks, open } = found.value
        const where = open.map((o) => `${o.topic}-${o.partition}@${o.from}`).join(", ")
        yield* say(
          `SIGKILL inside an open transaction: ${frozen.map((i) => i.id).join(", ")} frozen with ${where} open (look ${looks})`
        )
        for (const instance of frozen) yield* fleet.kill(instance)
        yield* Effect.sleep(Duration.millis(between(random, 300, 3000)))
        for (const instance of frozen) yield* fleet.start(instance)
        const outcomes = yield* Effect.forEach(open, outcomeOf, { concurrency: "unbounded" })
        if (outcomes.some((o) => o === "aborted")) {
          counts.transactionKillsAborted++
          return yield* say(`the open transaction at ${where} aborted (${outcomes.join(", ")}): fenced by the new owner`)
        }
        yield* say(`the transaction at ${where} ended ${outcomes.join(", ")}: decided before the freeze; again`)
      }
      counts.errors.push(`transaction kill: no open transaction of ${spec.label} aborted in 5 attempts`)
    })

    let bounceNumber = 0
    const bounce = Effect.gen(function*() {
      bounceNumber++
      if (bounceNumber % 2 === 1) {
        const victim = pick(random, fleet.running().filter((i) => !i.extra))
        if (victim === undefined) return yield* say("bounce: no running instance")
        bump(counts.bounces, victim.spec.app)
        yield* say(`bounce: SIGTERM ${victim.id} (${victim.runtime}), restart after it left`)
        yield* later(Effect.gen(function*() {
          const clean = yield* fleet.stop(victim, Duration.seconds(30))
          if (!clean) counts.errors.push(`${victim.id} did not stop within 30 s of SIGTERM`)
          yield* Effect.sleep(Duration.millis(between(random, 1000, 4000)))
          yield* fleet.start(victim)
        }))
      } else {
        const spec = pick(random, params.specs)
        if (spec === undefined) return
        bump(counts.bounces, spec.app)
        const extra = yield* fleet.add(spec, true)
        yield* say(`bounce: ${extra.id} joins, leaves later`)
        yield* fleet.start(extra)
        yield* later(Effect.gen(function*() {
          yield* Effect.sleep(Duration.millis(between(random, 5000, 15000)))
          const clean = yield* fleet.stop(extra, Duration.seconds(30))
          if (!clean) counts.errors.push(`${extra.id} did not stop within 30 s of SIGTERM`)
        }))
      }
    })

    const pause = Effect.gen(function*() {
      // Not one frozen already (two pauses at once would both pick it).
      const running = fleet.running().filter((i) => !paused.has(i))
      const active = running.filter(hasTasks)
      const victim = pick(random, active.length > 0 ? active : running)
      if (victim === undefined) return yield* say("pause: no running instance")
      const hook = params.pauseHook?.(victim.spec)
      if (hook !== undefined) return yield* pauseInTransaction(victim, hook)
      const frozen = yield* fleet.freeze(victim)
      if (!frozen) return
      paused.add(victim)
      bump(counts.pauses, victim.spec.app)
      yield* say(`SIGSTOP ${victim.id} (${victim.runtime}) for ${Duration.format(plan.pauseFor)}`)
      yield* later(Effect.sleep(plan.pauseFor).pipe(
        Effect.zipRight(fleet.thaw(victim)),
        Effect.zipRight(Effect.sync(() => paused.delete(victim))),
        Effect.zipRight(Effect.suspend(() => say(`SIGCONT ${victim.id}: a zombie if its tasks moved meanwhile`)))
      ))
    })

    /**
     * A pause with a `PauseHook`: frozen (SIGSTOP) at a moment the instance holds a transaction
     * open that a newer owner must reject (frozen and thawed again until it does, for up to 60 s;
     * then frozen as it is), kept frozen for `pauseFor` and until every partition it held has a
     * newer owner (up to 60 s more), then thawed.
     */
    const pauseInTransaction = (victim: Instance, hook: PauseHook) =>
      Effect.gen(function*() {
        const deadline = Date.now() + 60_000
        let looks = 0
        let held = false
        while (!held && Date.now() < deadline) {
          looks++
          if (!(yield* fleet.freeze(victim))) return yield* say(`pause: ${victim.id} is not running any more`)
          held = yield* Effect.orElseSucceed(hook.holdsTransaction(victim), () => false)
          if (!held) {
            yield* fleet.thaw(victim)
            yield* Effect.sleep(Duration.millis(between(random, 20, 150)))
          }
        }
        if (!held && !(yield* fleet.freeze(victim))) return yield* say(`pause: ${victim.id} is not running any more`)
        paused.add(victim)
        bump(counts.pauses, victim.spec.app)
        if (held) bump(counts.pausesInTransaction, victim.spec.app)
        const takenOver = yield* hook.takenOver(victim)
        yield* say(
          `SIGSTOP ${victim.id} (${victim.runtime}) ` +
            (held ? `inside an open database transaction (look ${looks})` : `(no open database transaction seen in ${looks} looks)`) +
            `, until its partitions have a newer owner`
        )
        yield* later(Effect.gen(function*() {
          yield* Effect.sleep(plan.pauseFor)
          const until = Date.now() + 60_000
          let moved = false
          while (!moved && Date.now() < until) {
            moved = yield* Effect.orElseSucceed(takenOver, () => false)
            if (!moved) yield* Effect.sleep(Duration.millis(500))
          }
          yield* fleet.thaw(victim)
          paused.delete(victim)
          yield* say(
            `SIGCONT ${victim.id}: ${moved ? "its partitions have a newer owner: a zombie" : "its partitions not all taken over within 70 s"}`
          )
        }))
      })

    const brokerKills = Option.match(params.cluster, {
      onNone: () =>
        plan.brokerKills > 0
          ? Effect.sync(() => {
            counts.errors.push("broker kills need a local cluster")
          })
          : Effect.void,
      onSome: (cluster) =>
        Effect.gen(function*() {
          for (let n = 0; n < plan.brokerKills; n++) {
            yield* at(((n + 0.5) / plan.brokerKills) * windowMs * 0.9)
            const index = Math.floor(random() * cluster.nodes.length)
            yield* say(`broker: SIGKILL node ${index}`)
            const killed = yield* Effect.either(cluster.killNode(index))
            if (killed._tag === "Left") {
              counts.errors.push(`kill of broker ${index} failed: ${killed.left.message}`)
              continue
            }
            counts.brokerKills++
            yield* Effect.sleep(Duration.millis(between(random, 3000, 10000)))
            // Restart only once the controller has moved the node's leaderships away: a
            // KRaft broker restarted while still registered as a leader loads its
            // transaction log's unreplicated tail and may send markers from it before
            // losing leadership, committing part of a transaction the next coordinator
            // aborts (test/chaos/FINDINGS.md, "A broker restarted before it is fenced").
            const node = cluster.nodes[index]
            if (node !== undefined) {
              const moved = yield* leadershipsMoved(cluster, node.nodeId)
              if (moved) yield* say(`broker: node ${index} (id ${node.nodeId}) leads no partition any more`)
              else counts.errors.push(`broker ${index} still leads partitions 60 s after its kill`)
            }
            const restarted = yield* cluster.restartNode(index).pipe(
              Effect.retry({ times: 3 }),
              Effect.either
            )
            if (restarted._tag === "Left") {
              counts.errors.push(`restart of broker ${index} failed: ${restarted.left.message}`)
            } else {
              yield* say(`broker: node ${index} is back`)
            }
          }
        })
    })

    const events = [
      ...Array.from({ length: plan.kills }, () => ({ at: between(random, 0.03, 0.97) * windowMs, kind: "kill" as const })),
      ...Array.from({ length: plan.bounces }, () => ({ at: between(random, 0.03, 0.97) * windowMs, kind: "bounce" as const })),
      ...Array.from({ length: plan.pauses }, () => ({ at: between(random, 0.03, 0.97) * windowMs, kind: "pause" as const })),
      ...Array.from({ length: plan.transactionKills }, () => ({
        at: between(random, 0.03, 0.97) * windowMs,
        kind: "transaction-kill" as const
      }))
    ].sort((a, b) => a.at - b.at)

    const brokerFiber = yield* Effect.fork(brokerKills)
    for (const event of events) {
      yield* at(event.at)
      yield* event.kind === "kill"
        ? kill
        : event.kind === "bounce"
        ? bounce
        : event.kind === "pause"
        ? pause
        : Effect.asVoid(later(killInTransaction))
    }
    yield* Fiber.join(brokerFiber)
    yield* Fiber.joinAll(background)
    return counts
  })
