/**
 * A `Topic.json` codec in its two steps: the Schema, then JSON. The composed
 * codec (`Schema.parseJson(schema)`) runs `JSON.stringify` and `JSON.parse`
 * inside Schema transformations, which cost more than the JSON itself; a
 * state change is encoded and decoded back on every record, so the batch runs
 * the two steps directly, with the same result.
 *
 * @internal
 */
import { Either, ParseResult, Schema } from "effect"

/** The Schema of each codec `Topic.json` made (its `A` is the codec's). */
const schemas = new WeakMap<object, Schema.Schema.AnyNoContext>()

/** Remembers the Schema that `codec` composes with JSON (`Topic.json` only). */
export const register = <A, I>(codec: Schema.Schema<A, string>, schema: Schema.Schema<A, I>): void => {
  schemas.set(codec, schema)
}

/** How a value is stored and read back through `codec`. */
export interface Steps<A> {
  readonly encode: (value: A) => Either.Either<string, ParseResult.ParseError>
  readonly decode: (text: string) => Either.Either<A, ParseResult.ParseError>
}

/**
 * The steps of `codec`: the Schema then JSON for a codec of `Topic.json`,
 * the codec's own encode and decode for any other.
 */
export const steps = <A>(codec: Schema.Schema<A, string>): Steps<A> => {
  // `register` keyed the Schema by the codec it composes: its type is the codec's `A`.
  const schema = schemas.get(codec) as Schema.Schema<A, unknown> | undefined
  if (schema === undefined) return { encode: Schema.encodeEither(codec), decode: Schema.decodeEither(codec) }
  const encode = Schema.encodeEither(schema)
  const decode = Schema.decodeUnknownEither(schema)
  const failure = (actual: unknown, e: unknown): Either.Either<never, ParseResult.ParseError> =>
    Either.left(new ParseResult.ParseError({ issue: new ParseResult.Type(schema.ast, actual, e instanceof Error ? e.message : String(e)) }))
  return {
    encode: (value) => {
      const encoded = encode(value)
      if (Either.isLeft(encoded)) return Either.left(encoded.left)
      try {
        return Either.right(JSON.stringify(encoded.right))
      } catch (e) {
        // A value JSON rejects (a bigint, a cycle): the Schema's encoded form is not JSON.
        return failure(encoded.right, e)
      }
    },
    decode: (text) => {
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch (e) {
        return failure(text, e)
      }
      return decode(parsed)
    }
  }
}
