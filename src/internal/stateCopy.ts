/**
 * The transform's private copy of a state: what the state Schema decodes
 * from the state's encoded form, so a `Schema.Class` keeps its methods and an
 * `Option` field stays an `Option`, and the transform's mutations never leak
 * into the state other records (or a retry) see.
 *
 * Immutable values (numbers, strings, booleans, null) are their own copy.
 *
 * @internal
 */
import { Either, Option, Schema } from "effect"
import type { ParseResult } from "effect"
import type { Codec } from "../Topic.ts"

/** Copies a state through its codec; fails with the codec's error when the state does not encode or decode. */
export type StateCopy<S> = (state: Option.Option<S>) => Either.Either<Option.Option<S>, ParseResult.ParseError>

export const make = <S>(codec: Codec<S>): StateCopy<S> => {
  const encode = Schema.encodeEither(codec)
  const decode = Schema.decodeEither(codec)
  return (state) => {
    if (Option.isNone(state)) return Either.right(state)
    const value = state.value
    if (typeof value !== "object" || value === null) return Either.right(state)
    return Either.map(Either.flatMap(encode(value), decode), Option.some)
  }
}
