/**
 * A global table's contents (`GlobalKTable.from`): the latest record per key
 * of every partition of its topic, as this instance has read them (Kafka
 * Streams' global store). Filled by its loader (`globalTableLoader.ts`, on a
 * broker; a test pipes records in), read by the joins of every sub-topology
 * that use it: a stream record looks a key up.
 *
 * Records are kept in their wire form and decoded on each lookup, so a
 * joiner gets its own copy of the value, which it may mutate.
 *
 * @internal
 */
import { Either } from "effect"
import type { ParseResult } from "effect"
import type * as Topic from "../../Topic.ts"
import type { KeyText } from "./keyText.ts"

type Wire = string | Uint8Array

/** Why a record of the global table's topic was not applied. */
export type Skipped =
  | { readonly _tag: "NoKey" }
  | { readonly _tag: "Undecodable"; readonly failure: Topic.DecodeFailure }

export class GlobalStore {
  private readonly entries = new Map<string, { readonly key: Wire; readonly value: Wire }>()

  constructor(
    /** The topic's table view: a tombstone decodes to a `null` value. */
    readonly topic: Topic.Any,
    private readonly keyText: KeyText
  ) {}

  /** Applies a record of the topic: sets its key's value, or deletes it (a tombstone); a record without a key or that does not decode is skipped. */
  apply(key: Wire | null, value: Wire | null): Either.Either<void, Skipped> {
    const decoded = this.topic.decode(key, value)
    if (Either.isLeft(decoded)) return Either.left({ _tag: "Undecodable", failure: decoded.left })
    if (key === null || decoded.right.key === null) return Either.left({ _tag: "NoKey" })
    const text = this.keyText.encode(decoded.right.key)
    if (Either.isLeft(text)) return Either.left({ _tag: "Undecodable", failure: { part: "key", cause: text.left } })
    if (value === null) this.entries.delete(text.right)
    else this.entries.set(text.right, { key, value })
    return Either.right(undefined)
  }

  /** The value of `key` (a fresh copy), `null` when the table has none; fails for a key its codec cannot encode. */
  get(key: unknown): Either.Either<unknown, ParseResult.ParseError> {
    return Either.flatMap(this.keyText.encode(key), (text) => {
      const entry = this.entries.get(text)
      if (entry === undefined) return Either.right(null)
      // It decoded when it was applied: its codec decodes it again.
      return Either.mapBoth(this.topic.decode(entry.key, entry.value), { onLeft: (failure) => failure.cause, onRight: (record) => record.value })
    })
  }

  /** How many keys the table has. */
  get size(): number {
    return this.entries.size
  }
}
