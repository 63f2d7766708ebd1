/**
 * What the typed stores (`KeyValueStore`, `WindowStore`, `SessionStore`)
 * share: reaching the running unit's access, and their keys and values in
 * their stored forms (a key through its Schema to text, a value through its
 * Schema to JSON, checked to read back as a transformer's state is).
 *
 * @internal
 */
import { Effect, Either, FiberRef, Option, Schema, SchemaAST } from "effect"
import type { ParseResult } from "effect"
import { EncodeError, StateNotStorable, StoredStateInvalid } from "../../SkeinError.ts"
import * as Topic from "../../Topic.ts"
import * as JsonCodec from "../codec/jsonCodec.ts"
import type { Access, Declaration, Kind } from "./access.ts"
import { current } from "./access.ts"
import { wellFormed } from "./keys.ts"

/** A declared store's typed parts. */
export interface Typed<K, V> extends Declaration {
  readonly keySchema: Schema.Schema<K, string>
  readonly values: JsonCodec.Steps<V>
}

/** The parts of a store declared with `kind`, `name` and its key and value Schemas. */
export const make = <K, V, VI>(
  kind: Kind,
  name: string,
  key: Schema.Schema<K, string>,
  value: Schema.Schema<V, VI>
): Typed<K, V> => ({
  name,
  kind,
  schema: `key ${String(SchemaAST.encodedAST(key.ast))}, value ${String(SchemaAST.encodedAST(value.ast))}`,
  keySchema: key,
  values: JsonCodec.steps(Topic.json(value))
})

/** The running unit's access to `store`; a defect, with the fix, outside a transform that declared it. */
export const access = (store: Declaration): Effect.Effect<Access> =>
  Effect.flatMap(FiberRef.get(current), (running) => {
    if (Option.isNone(running)) {
      return Effect.dieMessage(
        `${store.kind} "${store.name}" was used outside a transform: a store is read and written only from the ` +
          "transform (or onTimer) of a transformer that lists it in its stores"
      )
    }
    const declared = running.value.declared(store.name)
    if (declared === undefined || declared.kind !== store.kind || declared.schema !== store.schema) {
      return Effect.dieMessage(
        `${running.value.transformer}: ${store.kind} "${store.name}" is not one of its stores: add it to its ` +
          "stores (Transformer.make({ ..., stores: [...] }), or KStream.process({ ..., stores: [...] }) for a process node)"
      )
    }
    return Effect.succeed(running.value)
  })

/** A key's stored text; fails when its Schema does not encode it, dies when the text has no UTF-8 form. */
export const encodeKey = <K, V>(store: Typed<K, V>, key: K): Effect.Effect<string, EncodeError> => {
  const encoded = Schema.encodeEither(store.keySchema)(key)
  if (Either.isLeft(encoded)) return Effect.fail(new EncodeError({ topic: `key of store "${store.name}"`, cause: encoded.left }))
  return wellFormed(encoded.right) ? Effect.succeed(encoded.right) : Effect.dieMessage(
    `${store.kind} "${store.name}": a key encodes to text with a lone surrogate, which has no UTF-8 form to order ` +
      "by: make the key Schema encode to well-formed text"
  )
}

/** A stored key's text back to the key, or the error naming the store. */
export const decodeKey = <K, V>(store: Typed<K, V>, running: Access, storeKey: string, text: string): Either.Either<K, StoredStateInvalid> =>
  Either.mapLeft(Schema.decodeEither(store.keySchema)(text), (cause) => invalid(store, running, storeKey, cause))

/** A value's stored text, checked to read back; fails as a transformer's state would. */
export const encodeValue = <K, V>(
  store: Typed<K, V>,
  running: Access,
  keyText: string,
  value: V
): Either.Either<string, EncodeError | StateNotStorable> =>
  Either.mapLeft(store.values.store(value), (failure) =>
    failure._tag === "Encode"
      ? new EncodeError({ topic: `value of store "${store.name}"`, cause: failure.cause })
      : new StateNotStorable({
        transformer: running.transformer,
        kind: "state",
        key: `${keyText} of store "${store.name}"`,
        source: running.source,
        cause: failure.cause
      }))

/** A stored value back, or the error naming the store and key. */
export const decodeValue = <K, V>(
  store: Typed<K, V>,
  running: Access,
  storeKey: string,
  text: string
): Either.Either<V, StoredStateInvalid> =>
  Either.mapLeft(store.values.decode(text), (cause) => invalid(store, running, storeKey, cause))

const invalid = <K, V>(store: Typed<K, V>, running: Access, storeKey: string, cause: ParseResult.ParseError) =>
  new StoredStateInvalid({
    transformer: running.transformer,
    kind: "state",
    key: `${JSON.stringify(storeKey)} of ${store.kind} "${store.name}"`,
    partition: running.partition,
    store: running.path,
    cause
  })
