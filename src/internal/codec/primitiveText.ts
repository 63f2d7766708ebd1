/**
 * The text codecs whose behaviour Effect fixes, encoded without the Schema
 * parser on the path every output takes: `Schema.String` and
 * `Schema.NumberFromString` (the codecs the docs and examples use for keys
 * and values). A Schema's encode of a transformation builds a parser's
 * chain of closures and `Either`s per call, the largest allocation of a
 * record's processing for a `NumberFromString` value (about a seventh of
 * `batch.run`'s in `bench/batch.ts`).
 *
 * A fast path returns only what the Schema returns for the same input: it
 * takes the inputs whose result it knows (a string for `String`, a number
 * for `NumberFromString`) and hands every other one to the Schema, so the
 * errors are the Schema's own.
 *
 * @internal
 */
import { Either, Schema, SchemaAST } from "effect"
import type { ParseResult } from "effect"

/**
 * The `typeof` of the values a Schema's encode returns as they are (and passes, so a fast path can
 * return them without the parser): a bare `Schema.Number`, `String` or `Boolean` keyword's type.
 */
export const encodesAsItself = (ast: SchemaAST.AST): "number" | "string" | "boolean" | undefined =>
  SchemaAST.isNumberKeyword(ast) ? "number" : SchemaAST.isStringKeyword(ast) ? "string" : SchemaAST.isBooleanKeyword(ast) ? "boolean" : undefined

/** A text codec's two directions, as `Topic` calls them. */
export interface TextSteps<A> {
  readonly decode: (text: string) => Either.Either<A, ParseResult.ParseError>
  readonly encode: (value: A) => Either.Either<string, ParseResult.ParseError>
}

/**
 * The steps of `codec`: `Schema.String`'s decode and encode and `Schema.NumberFromString`'s
 * encode without the parser, the Schema's own for everything else.
 */
export const steps = <A>(codec: Schema.Schema<A, string>): TextSteps<A> => {
  const decode = Schema.decodeEither(codec)
  const encode = Schema.encodeEither(codec)
  if (encodesAsItself(codec.ast) === "string") {
    // A bare string keyword's `A` is `string`: any text is one, as the Schema's check finds.
    const isText = (text: unknown): text is A => typeof text === "string"
    return {
      decode: (text) => isText(text) ? Either.right(text) : decode(text),
      encode: (value) => typeof value === "string" ? Either.right(value) : encode(value)
    }
  }
  if (codec.ast === Schema.NumberFromString.ast) {
    return { decode, encode: (value) => typeof value === "number" ? Either.right(String(value)) : encode(value) }
  }
  return { decode, encode }
}
