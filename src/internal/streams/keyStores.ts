/**
 * The state a sub-topology keeps per key for its tables: each table read
 * from a topic (`KTable.from`) and its aggregation (`KGroupedStream.count`,
 * `reduce`, `aggregate`) is a store, and a key's state holds each store's
 * value for that key and the timestamp of the record that made it (Kafka
 * Streams' `ValueAndTimestamp`). A join reads the stores of both its inputs
 * in one sub-topology: a stream-table join looks a key up in its table's
 * store, a table-table join in the other side's.
 *
 * One store keeps the form a single table or aggregation always had
 * (`{ value, timestamp }`, its value in its Schema's encoded form), so a
 * topology that gains nothing keeps its stored state; several stores keep
 * one such entry per store name (`{ [name]: { value, timestamp } }`).
 *
 * Values are decoded from their stored form on each read: what a read
 * returns is the record's own copy, which user functions (a joiner, a table
 * operator) may mutate.
 *
 * @internal
 */
import { Either, Option, ParseResult, Schema } from "effect"
import { EncodeError } from "../../SkeinError.ts"
import * as Transformer from "../../Transformer.ts"
import type * as Graph from "./graph.ts"

/** A store's value for a key, with the timestamp of the record that made it. */
export interface Slot {
  readonly value: unknown
  readonly timestamp: number
}

/** One store: the node that keeps it (a table's source, an aggregation), its name, its values' Schema. */
export interface Store {
  readonly node: Graph.Node
  readonly name: string
  readonly use: <X>(f: <V, I>(value: Schema.Schema<V, I>) => X) => X
}

const Entry = Schema.Struct({ value: Schema.Unknown, timestamp: Schema.Number })
type Entry = typeof Entry.Type

/** How the sub-topology's stores are kept per key (state `S`): the state's Schema, and reads and writes of its slots. */
export interface KeyStores<S, I> {
  readonly state: Schema.Schema<S, I>
  /** The slots of a key's stored state, decoded: the record's own copies. */
  readonly read: (state: Option.Option<S>) => Either.Either<Map<Graph.Node, Slot>, EncodeError>
  /** The state that keeps `slots` (no slot left: the key's state is deleted). */
  readonly write: (slots: ReadonlyMap<Graph.Node, Slot>) => Either.Either<Transformer.StateChange<S>, EncodeError>
}

/** The stores of a sub-topology, whatever the form of their state: `use` hands them to a function generic in it. */
export interface AnyKeyStores {
  readonly use: <X>(f: <S, I>(stores: KeyStores<S, I>) => X) => X
}

interface Codec {
  readonly store: Store
  readonly decode: (encoded: unknown) => Either.Either<unknown, ParseResult.ParseError>
  readonly encode: (value: unknown) => Either.Either<unknown, ParseResult.ParseError>
}

const codecOf = (store: Store): Codec =>
  store.use((schema) => ({
    store,
    decode: Schema.decodeUnknownEither(schema),
    // The value was made by the operators that typed the store with this Schema: encoding checks it.
    encode: Schema.encodeUnknownEither(schema)
  }))

/** The slots of `entries` (per store, its entry or none), decoded. */
const readEntries = (
  entries: ReadonlyArray<readonly [Codec, Entry | undefined]>,
  failed: (cause: ParseResult.ParseError) => EncodeError
): Either.Either<Map<Graph.Node, Slot>, EncodeError> => {
  const slots = new Map<Graph.Node, Slot>()
  for (const [codec, entry] of entries) {
    if (entry === undefined) continue
    const value = codec.decode(entry.value)
    if (Either.isLeft(value)) return Either.left(failed(value.left))
    slots.set(codec.store.node, { value: value.right, timestamp: entry.timestamp })
  }
  return Either.right(slots)
}

/** The entries of `slots` per store name, encoded. */
const writeEntries = (
  codecs: ReadonlyArray<Codec>,
  slots: ReadonlyMap<Graph.Node, Slot>,
  failed: (cause: ParseResult.ParseError) => EncodeError
): Either.Either<Array<readonly [string, Entry]>, EncodeError> => {
  const entries: Array<readonly [string, Entry]> = []
  for (const codec of codecs) {
    const slot = slots.get(codec.store.node)
    if (slot === undefined) continue
    const value = codec.encode(slot.value)
    if (Either.isLeft(value)) return Either.left(failed(value.left))
    entries.push([codec.store.name, { value: value.right, timestamp: slot.timestamp }])
  }
  return Either.right(entries)
}

/** The stores of sub-topology `name` (at least one), in their declaration order. */
export const make = (name: string, stores: ReadonlyArray<Store>): AnyKeyStores => {
  const codecs = stores.map(codecOf)
  const failed = (cause: ParseResult.ParseError) => new EncodeError({ topic: `state of ${name}`, cause })
  const [single] = codecs
  if (codecs.length === 1 && single !== undefined) {
    const one: KeyStores<Entry, typeof Entry.Encoded> = {
      state: Entry,
      read: (state) => readEntries([[single, Option.getOrUndefined(state)]], failed),
      write: (slots) =>
        Either.map(writeEntries(codecs, slots, failed), ([entry]) => entry === undefined ? Transformer.remove : Transformer.set(entry[1]))
    }
    return { use: (f) => f(one) }
  }
  const Entries = Schema.Record({ key: Schema.String, value: Entry })
  const several: KeyStores<typeof Entries.Type, typeof Entries.Encoded> = {
    state: Entries,
    read: (state) =>
      readEntries(codecs.map((codec) => [codec, Option.isSome(state) ? state.value[codec.store.name] : undefined] as const), failed),
    write: (slots) =>
      Either.map(writeEntries(codecs, slots, failed), (entries) =>
        entries.length === 0 ? Transformer.remove : Transformer.set(Object.fromEntries(entries)))
  }
  return { use: (f) => f(several) }
}
