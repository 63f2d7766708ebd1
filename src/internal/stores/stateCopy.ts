/**
 * The transform's private copy of a state: what the state Schema decodes
 * from the state's encoded form, so a `Schema.Class` keeps its methods and an
 * `Option` field stays an `Option`, and the transform's mutations never leak
 * into the state other records (or a retry) see.
 *
 * Immutable values (numbers, strings, booleans, null) are their own copy.
 *
 * A transformer whose code never mutates a state it was given (the stream
 * DSL's compiled transformers, whose operators build new values and copy
 * what they hand to user functions themselves) is marked with
 * `readsWithoutCopy`: the batch then gives it the states as they are.
 *
 * @internal
 */
import { Either, Option, Schema, SchemaAST } from "effect"
import type { ParseResult } from "effect"
import type { Codec } from "../../Topic.ts"

/** Copies a state through its codec; fails with the codec's error when the state does not encode or decode. */
export type StateCopy<S> = (state: Option.Option<S>) => Either.Either<Option.Option<S>, ParseResult.ParseError>

/** Copies one value through its codec (objects only: an immutable value is its own copy). */
export type ValueCopy<A> = (value: A) => Either.Either<A, ParseResult.ParseError>

export const value = <A>(codec: Codec<A>): ValueCopy<A> => {
  const encode = Schema.encodeEither(codec)
  const decode = Schema.decodeEither(codec)
  return (value) => typeof value !== "object" || value === null ? Either.right(value) : Either.flatMap(encode(value), decode)
}

export const make = <S>(codec: Codec<S>): StateCopy<S> => {
  const copy = value(codec)
  return (state) => {
    if (Option.isNone(state)) return Either.right(state)
    const value = state.value
    if (typeof value !== "object" || value === null) return Either.right(state)
    return Either.map(copy(value), Option.some)
  }
}

/**
 * Whether every value of `ast`'s type is immutable (a number, a string, a boolean, a literal, a
 * union of them, or a refinement of one): then a state is its own copy, and reading one needs no
 * copy at all.
 */
const immutableType = (ast: SchemaAST.AST): boolean => {
  switch (ast._tag) {
    case "NumberKeyword":
    case "StringKeyword":
    case "BooleanKeyword":
    case "BigIntKeyword":
    case "Literal":
    case "Enums":
    case "TemplateLiteral":
      return true
    case "Refinement":
      return immutableType(ast.from)
    case "Union":
      return ast.types.every(immutableType)
    default:
      return false
  }
}

/** Whether a state of `codec` is immutable: its type side (what the transform is given) has no object. */
export const immutable = <A>(codec: Codec<A>): boolean => immutableType(SchemaAST.typeAST(codec.ast))

/** The transformers marked by `readsWithoutCopy` (a mark only Skein's own code can set). */
const uncopied = new WeakSet<object>()

/**
 * Marks `transformer` as never mutating a state it is given (its record's
 * state, `TaskState.get`'s, a timer's): the batch skips the copy on read.
 * Only for Skein's own transformers, verified not to mutate: a user's
 * transformer keeps the copy.
 */
export const readsWithoutCopy = <T extends object>(transformer: T): T => {
  uncopied.add(transformer)
  return transformer
}

/** Whether the batch copies the states `transformer` reads (every transformer not marked by `readsWithoutCopy`). */
export const copiesOnRead = (transformer: object): boolean => !uncopied.has(transformer)
