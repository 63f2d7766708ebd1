/**
 * A foreign-key table-table join (KIP-213), as Kafka Streams 4.4 runs it:
 *
 * 1. A change of the left table (its key `K`, a value naming a key `KO` of
 *    the right table) sends subscriptions to the subscription topic, keyed by
 *    `KO`, co-partitioned with the right table (`subscriptions`: Kafka
 *    Streams' `SubscriptionSendProcessorSupplier`). Each carries the left
 *    key, the partition of the left record, an instruction and a hash of the
 *    left value it was sent for.
 * 2. The right side keeps the subscriptions per `KO` (a key-value store, one
 *    entry per left key, scanned by prefix) and answers each subscription
 *    with the right table's value (`answer`: `SubscriptionReceive` and
 *    `SubscriptionJoinProcessorSupplier`), and each change of the right
 *    table to every subscriber of its key (`ForeignTableJoinProcessorSupplier`),
 *    on the response topic, keyed by the left key, to the left record's
 *    partition.
 * 3. The left side joins a response with its current value only when the
 *    response was sent for it (the hashes agree): a stale one is dropped
 *    (`result`: `ResponseJoinProcessorSupplier`).
 *
 * The hash is of the left table's stored value (its source's, in the form
 * its state keeps it), or none while the join sees no value (a deletion, or
 * a value its `filter` rejects); Kafka Streams hashes the value the join sees,
 * serialized. The two agree wherever a response is current; where the
 * source changed and the join's value did not, Skein drops the older
 * response and joins the newer one.
 *
 * @internal
 */
import { createHash } from "node:crypto"
import { Effect, Either, Option, Schema } from "effect"
import type { ParseResult } from "effect"
import * as KeyValueStore from "../../KeyValueStore.ts"
import * as Topic from "../../Topic.ts"
import * as Graph from "./graph.ts"
import * as KeyText from "./keyText.ts"

/**
 * What the right side does with a subscription (Kafka Streams' `Instruction`):
 * `D` deletes it without an answer, `DP` deletes it and answers "no value",
 * `PN` keeps it and answers with the right value or "no value", `P` keeps it
 * and answers only when the right table has a value.
 */
export const Instruction = Schema.Literal("D", "DP", "PN", "P")
export type Instruction = typeof Instruction.Type

/** A subscription as the subscription topic carries it (its key: the foreign key). */
export const Subscription = Schema.Struct({
  i: Instruction,
  /** The hash of the left value it was sent for (`hashOf`); `null`: none (a deletion). */
  h: Schema.NullOr(Schema.String),
  /** The left key, as text (its codec's key text). */
  k: Schema.String,
  /** The partition of the left record: where the response goes. */
  p: Schema.Int
})
export type Subscription = typeof Subscription.Type

/** A response as the response topic carries it (its key: the left key). */
export const Response = Schema.Struct({
  /** The hash of the subscription it answers. */
  h: Schema.NullOr(Schema.String),
  /** The foreign key, as text; `null` for a subscription without one (a left join's). */
  f: Schema.NullOr(Schema.String),
  /** The right table's stored value for the foreign key (its encoded form), `null`: none. */
  r: Schema.NullOr(Schema.Struct({ v: Schema.Unknown })),
  /** The partition of the left record it goes to. */
  p: Schema.Int
})
export type Response = typeof Response.Type

/** A subscription as the right side stores it, per foreign key and left key. */
export const Stored = Schema.Struct({ h: Schema.NullOr(Schema.String), p: Schema.Int })
export type Stored = typeof Stored.Type

/** The hash of a stored value's encoded form: 128 bits, as Kafka Streams' murmur3. */
export const hashOf = (encoded: unknown): string =>
  createHash("sha256").update(JSON.stringify(encoded) ?? "undefined").digest("base64").slice(0, 22)

/** The store key prefix of a foreign key's subscriptions (its text's length first: no key is a prefix of another's). */
export const prefixOf = (foreignKeyText: string): string => `${foreignKeyText.length}:${foreignKeyText}:`

/** The store key of a subscription: its foreign key's prefix, then the left key. */
export const storeKeyOf = (foreignKeyText: string, leftKeyText: string): string => prefixOf(foreignKeyText) + leftKeyText

/** A subscription to send: to a foreign key (`null`: none, a left join's), with its instruction. */
export interface Send {
  readonly foreignKey: unknown
  readonly instruction: Instruction
}

/**
 * The subscriptions a change of the left table sends, given the foreign keys
 * of its new and previous values (`null`: none, or no value): Kafka Streams'
 * `SubscriptionSendProcessorSupplier`. `same` compares two foreign keys (by
 * their encoded form). `dropped` is called for an inner join's value that
 * names no foreign key (Kafka Streams' dropped-records metric).
 */
export const subscriptions = (
  kind: "inner" | "left",
  change: { readonly hasValue: boolean; readonly hadValue: boolean },
  newForeignKey: unknown,
  oldForeignKey: unknown,
  same: (a: unknown, b: unknown) => boolean,
  dropped: () => void
): ReadonlyArray<Send> => {
  if (kind === "left") {
    // Every change of a left join gets an answer (a deletion too, through a subscription without a key).
    if (!change.hasValue && !change.hadValue) return []
    const unsubscribe = oldForeignKey !== null && (newForeignKey === null || !same(newForeignKey, oldForeignKey))
    return [
      ...(unsubscribe ? [{ foreignKey: oldForeignKey, instruction: "D" as const }] : []),
      { foreignKey: newForeignKey, instruction: "PN" }
    ]
  }
  if (!change.hasValue) return oldForeignKey === null ? [] : [{ foreignKey: oldForeignKey, instruction: "DP" }]
  if (newForeignKey === null) {
    dropped()
    return oldForeignKey === null ? [] : [{ foreignKey: oldForeignKey, instruction: "DP" }]
  }
  if (oldForeignKey === null) return [{ foreignKey: newForeignKey, instruction: "P" }]
  return same(newForeignKey, oldForeignKey)
    ? [{ foreignKey: newForeignKey, instruction: "P" }]
    : [{ foreignKey: oldForeignKey, instruction: "D" }, { foreignKey: newForeignKey, instruction: "PN" }]
}

/**
 * Whether the right side answers a subscription, given whether the right
 * table has a value for its foreign key: `DP` and `PN` always, `P` only
 * with a value, `D` never.
 */
export const answers = (instruction: Instruction, hasValue: boolean): boolean =>
  instruction === "DP" || instruction === "PN" || (instruction === "P" && hasValue)

/** Whether the right side keeps a subscription (`D` and `DP` delete it). */
export const keeps = (instruction: Instruction): boolean => instruction === "PN" || instruction === "P"

/**
 * The join's change for a current response: `joined` of the left value and
 * the right value, or a deletion (`null`) when the right side has no value
 * and the join is inner, or the left side has none either.
 */
export const result = (
  kind: "inner" | "left",
  leftValue: unknown,
  rightValue: unknown,
  joiner: (left: unknown, right: unknown) => unknown
): unknown => rightValue === null && (kind === "inner" || leftValue === null) ? null : joiner(leftValue, rightValue)

/** What a foreign-key join's nodes need of its sides: their keys as text, their stored values' encoded forms. */
export interface Sides {
  readonly leftKey: KeyText.KeyText
  readonly rightKey: KeyText.KeyText
  readonly encodeLeft: (value: unknown) => Either.Either<unknown, ParseResult.ParseError>
  readonly encodeRight: (value: unknown) => Either.Either<unknown, ParseResult.ParseError>
  readonly decodeRight: (encoded: unknown) => Either.Either<unknown, ParseResult.ParseError>
}

/** The sides of a join of the table read by `left` with the one read by `right`. */
export const sidesOf = (left: Graph.TableSource, right: Graph.TableSource): Sides => ({
  leftKey: left.keyTexts[0]!,
  rightKey: right.keyTexts[0]!,
  encodeLeft: left.use((schema) => Schema.encodeUnknownEither(schema)),
  encodeRight: right.use((schema) => Schema.encodeUnknownEither(schema)),
  decodeRight: right.use((schema) => Schema.decodeUnknownEither(schema))
})

/**
 * The codecs of a foreign-key join's subscription topic: keyed by the right
 * table's key (`right`: its source), so co-partitioned with it.
 */
export const subscriptionCodecs = (right: Graph.TableSource): Graph.Codecs =>
  right.keyed((key) => Graph.codecs(key, Topic.json(Subscription)))

/**
 * The codecs of a foreign-key join's response topic: keyed by the left
 * table's key (`left`: its source), each response to the partition of the
 * left record it answers (Kafka Streams' response partitioner).
 */
export const responseCodecs = (left: Graph.TableSource): Graph.Codecs => left.keyed(responseCodecsOf)

const responseCodecsOf = <K>(key: Topic.AnyCodec<K>): Graph.Codecs => ({
  topic: (name) => {
    const topic = Topic.make({ name, key, value: Topic.json(Response) })
    return {
      topic,
      write: (record) => {
        // The key is the left table's (a subscription's, decoded: a `K`); the value a response (`respond`).
        const response = record.value as Response
        return Topic.record(topic, record.key as K | null, response, record.headers, { timestamp: record.timestamp, partition: response.p })
      },
      keyText: KeyText.make(key)
    }
  }
})

/** The subscriptions a foreign-key join's right side keeps, in a store named `name` of its sub-topology. */
export const subscriptionStore = (name: string): KeyValueStore.KeyValueStore<string, Stored> =>
  KeyValueStore.make({ name, key: Schema.String, value: Stored })

/** What the nodes of a foreign-key join use of the record's run through its sub-topology (`compile.ts`). */
export interface Run {
  /** The input record's partition: where a response to its subscriptions goes. */
  readonly partition: number
  readonly sides: Sides
  /** The internal topic a node of another sub-topology is written to from this one. */
  readonly write: (node: Graph.Node, record: Graph.StreamRecord) => void
  readonly visitChildren: (node: Graph.Node, record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>
  readonly visitTableChildren: (node: Graph.Node, record: Graph.StreamRecord) => Effect.Effect<void, unknown, unknown>
  /** Counts and logs a dropped record (Kafka Streams' dropped-records metric). */
  readonly dropped: (node: Graph.Node, why: string) => Effect.Effect<void>
  /** The record's `OperatorFailed`. */
  readonly failed: (node: Graph.Node, kind: string, cause: unknown) => Effect.Effect<never, unknown>
  /** A table's value for a key and its timestamp, through its operators (`null`: none); throws what they throw. */
  readonly lookup: (table: Graph.Node, key: unknown) => { readonly value: unknown; readonly timestamp: number }
  /** The value a table's store keeps for the record's key (its source's), if any. */
  readonly stored: (table: Graph.Node) => Option.Option<unknown>
  /** A stored value through a table's operators (`null`: none); throws what they throw. */
  readonly through: (table: Graph.Node, key: unknown, value: unknown, timestamp: number) => unknown
}

class Invariant extends Error {}

const orThrow = <A>(either: Either.Either<A, ParseResult.ParseError>, what: string): A => {
  if (Either.isRight(either)) return either.right
  throw new Invariant(`Skein invariant broken: ${what}: ${either.left.message}`)
}

/** The hash of the left table's value for the record's key: `null` while the join sees none. */
const leftHash = (run: Run, table: Graph.Node, joinValue: unknown): string | null => {
  if (joinValue === null) return null
  const stored = run.stored(table)
  if (Option.isNone(stored)) return null
  return hashOf(orThrow(run.sides.encodeLeft(stored.value), "the left table's stored value does not encode"))
}

/**
 * A change of the left table reaching the join's subscription topic: the
 * subscriptions it sends (`subscriptions`), each keyed by its foreign key.
 */
export const subscribe = (run: Run, node: Graph.FkSubscribe, record: Graph.StreamRecord): Effect.Effect<void, unknown, unknown> => {
  const { join } = node
  const previous = record.previous ?? null
  let sends: ReadonlyArray<Send>
  let noForeignKey = false
  let pk: string
  let hash: string | null
  try {
    const foreignKeyOf = (value: unknown): unknown => value === null ? null : join.foreignKey(value, record.key) ?? null
    const newForeignKey = foreignKeyOf(record.value)
    const oldForeignKey = foreignKeyOf(previous)
    const text = (key: unknown) => orThrow(run.sides.rightKey.encode(key), "a foreign key does not encode with the right table's key codec")
    sends = subscriptions(
      join.kind,
      { hasValue: record.value !== null, hadValue: previous !== null },
      newForeignKey,
      oldForeignKey,
      (a, b) => text(a) === text(b),
      () => {
        noForeignKey = true
      }
    )
    pk = orThrow(run.sides.leftKey.encode(record.key), "a left key does not encode")
    hash = leftHash(run, node.parent, record.value)
  } catch (cause) {
    if (cause instanceof Invariant) return Effect.die(cause)
    return run.failed(node, "foreign key extractor", cause)
  }
  for (const send of sends) {
    const subscription: Subscription = { i: send.instruction, h: hash, k: pk, p: run.partition }
    run.write(node, { key: send.foreignKey, value: subscription, timestamp: record.timestamp, headers: record.headers })
  }
  return noForeignKey ? run.dropped(node, "whose value names no foreign key") : Effect.void
}

/**
 * The right side of the join, for a subscription (`fromSubscriptions`) or a
 * change of the right table: keeps the subscriptions and answers them.
 */
export const respond = (
  run: Run,
  node: Graph.FkRespond,
  store: KeyValueStore.KeyValueStore<string, Stored>,
  record: Graph.StreamRecord,
  fromSubscriptions: boolean
): Effect.Effect<void, unknown, unknown> => {
  const encodedRight = (): unknown =>
    Option.match(run.stored(node.table), {
      onNone: () => {
        throw new Invariant("Skein invariant broken: the right table has a value and no stored one")
      },
      onSome: (value) => orThrow(run.sides.encodeRight(value), "the right table's stored value does not encode")
    })
  const responseTo = (pkText: string, response: Response, timestamp: number): Effect.Effect<void, unknown, unknown> =>
    Effect.suspend(() => {
      const pk = orThrow(run.sides.leftKey.decode(pkText), "a subscription's left key does not decode")
      return run.visitChildren(node, { key: pk, value: response, timestamp, headers: record.headers })
    })
  try {
    if (!fromSubscriptions) {
      // Kafka Streams' ForeignTableJoinProcessor: every subscriber of the key gets the new value (or none).
      if (record.key === null) return Effect.void
      const fkText = orThrow(run.sides.rightKey.encode(record.key), "a right key does not encode")
      const r = record.value === null ? null : { v: encodedRight() }
      const prefix = prefixOf(fkText)
      return Effect.flatMap(store.prefix(prefix), (entries) =>
        Effect.forEach(
          entries,
          (entry) => responseTo(entry.key.slice(prefix.length), { h: entry.value.h, f: fkText, r, p: entry.value.p }, record.timestamp),
          { discard: true }
        ))
    }
    // A subscription, as the topic's codec decoded it.
    const subscription = record.value as Subscription
    if (record.key === null) {
      // A left join's subscription without a foreign key: answered "no value", kept nowhere.
      if (subscription.i !== "PN") return run.dropped(node, "without a foreign key")
      return responseTo(subscription.k, { h: subscription.h, f: null, r: null, p: subscription.p }, record.timestamp)
    }
    const fkText = orThrow(run.sides.rightKey.encode(record.key), "a foreign key does not encode")
    const storeKey = storeKeyOf(fkText, subscription.k)
    const right = run.lookup(node.table, record.key)
    const hasValue = right.value !== null
    const timestamp = hasValue ? Math.max(record.timestamp, right.timestamp) : record.timestamp
    const r = hasValue && subscription.i !== "DP" ? { v: encodedRight() } : null
    const kept = keeps(subscription.i) ? store.put(storeKey, { h: subscription.h, p: subscription.p }) : store.delete(storeKey)
    return Effect.flatMap(kept, () =>
      answers(subscription.i, hasValue)
        ? responseTo(subscription.k, { h: subscription.h, f: fkText, r, p: subscription.p }, timestamp)
        : Effect.void)
  } catch (cause) {
    if (cause instanceof Invariant) return Effect.die(cause)
    return run.failed(node, "table lookup", cause)
  }
}

/**
 * A response reaching the left side: joined with the left table's value when
 * it answers that value (the hashes agree), else dropped as stale.
 */
export const joinResponse = (run: Run, node: Graph.FkJoin, record: Graph.StreamRecord): Effect.Effect<void, unknown, unknown> => {
  const { join } = node
  // A response, as the topic's codec decoded it.
  const response = record.value as Response
  let value: unknown
  try {
    const left = run.lookup(node.table, record.key)
    if (leftHash(run, node.table, left.value) !== response.h) {
      return run.dropped(node, "answering a value the left table no longer has")
    }
    const right = response.r === null || response.f === null ? null : run.through(
      join.right,
      orThrow(run.sides.rightKey.decode(response.f), "a response's foreign key does not decode"),
      orThrow(run.sides.decodeRight(response.r.v), "a response's right value does not decode"),
      record.timestamp
    )
    value = result(join.kind, left.value, right, join.joiner)
  } catch (cause) {
    if (cause instanceof Invariant) return Effect.die(cause)
    return run.failed(node, "joiner", cause)
  }
  return run.visitTableChildren(node, { key: record.key, value, timestamp: record.timestamp, headers: record.headers })
}
