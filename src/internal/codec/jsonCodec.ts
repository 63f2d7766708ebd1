/**
 * A `Topic.json` codec in its two steps: the Schema, then JSON. The composed
 * codec (`Schema.parseJson(schema)`) runs `JSON.stringify` and `JSON.parse`
 * inside Schema transformations, which cost more than the JSON itself; a
 * state change is stored, and checked to read back, on every record, so the
 * batch runs the two steps directly, with the same result.
 *
 * @internal
 */
import { Either, ParseResult, Schema } from "effect"
import * as JsonExact from "./jsonExact.ts"
import { encodesAsItself } from "./primitiveText.ts"

/** The Schema of each codec `Topic.json` made (its `A` is the codec's). */
const schemas = new WeakMap<object, Schema.Schema.AnyNoContext>()

/** Remembers the Schema that `codec` composes with JSON (`Topic.json` only). */
export const register = <A, I>(codec: Schema.Schema<A, string>, schema: Schema.Schema<A, I>): void => {
  schemas.set(codec, schema)
}

/** Why a value has no stored form: its encode failed, or its stored text does not decode back. */
export type StoreFailure =
  | { readonly _tag: "Encode"; readonly cause: ParseResult.ParseError }
  | { readonly _tag: "ReadBack"; readonly cause: ParseResult.ParseError }

/** How a value is stored and read back through `codec`. */
export interface Steps<A> {
  readonly encode: (value: A) => Either.Either<string, ParseResult.ParseError>
  readonly decode: (text: string) => Either.Either<A, ParseResult.ParseError>
  /**
   * The stored text of `value`, proven to decode back: what `encode` then
   * `decode` of its text prove, without reading the text back when the
   * encoded value is plain JSON and the Schema's decode undoes its encode by
   * construction (no transformation, no declaration).
   */
  readonly store: (value: A) => Either.Either<string, StoreFailure>
}

const cache = new WeakMap<object, unknown>()

/**
 * The steps of `codec`: the Schema then JSON for a codec of `Topic.json`,
 * the codec's own encode and decode for any other (made once per codec).
 */
export const steps = <A>(codec: Schema.Schema<A, string>): Steps<A> => {
  // `make` built the cached steps from this codec: they take and give its `A`.
  const cached = cache.get(codec) as Steps<A> | undefined
  if (cached !== undefined) return cached
  const made = make(codec)
  cache.set(codec, made)
  return made
}

const make = <A>(codec: Schema.Schema<A, string>): Steps<A> => {
  // `register` keyed the Schema by the codec it composes: its type is the codec's `A`.
  const schema = schemas.get(codec) as Schema.Schema<A, unknown> | undefined
  if (schema === undefined) {
    const encode = Schema.encodeEither(codec)
    const decode = Schema.decodeEither(codec)
    return {
      encode,
      decode,
      store: (value) => {
        const text = encode(value)
        if (Either.isLeft(text)) return Either.left({ _tag: "Encode", cause: text.left })
        const back = decode(text.right)
        return Either.isLeft(back) ? Either.left({ _tag: "ReadBack", cause: back.left }) : Either.right(text.right)
      }
    }
  }
  const encodeSchema = Schema.encodeEither(schema)
  // A bare primitive keyword (`Schema.Number`, `Schema.String`, `Schema.Boolean`) encodes a value
  // of its type as itself: without the Schema's parser (a chain of closures and `Either`s a
  // call), and every other value still goes to it, so results and errors are the Schema's.
  const itself = encodesAsItself(schema.ast)
  const encode = itself === undefined
    ? encodeSchema
    : (value: A): Either.Either<unknown, ParseResult.ParseError> => typeof value === itself ? Either.right(value) : encodeSchema(value)
  const decode = Schema.decodeUnknownEither(schema)
  const lawful = JsonExact.lawful(schema.ast)
  const issue = (actual: unknown, e: unknown): ParseResult.ParseError =>
    new ParseResult.ParseError({ issue: new ParseResult.Type(schema.ast, actual, e instanceof Error ? e.message : String(e)) })
  const failure = (actual: unknown, e: unknown): Either.Either<never, ParseResult.ParseError> => Either.left(issue(actual, e))
  const parse = (text: string): Either.Either<unknown, ParseResult.ParseError> => {
    try {
      return Either.right(JSON.parse(text))
    } catch (e) {
      return failure(text, e)
    }
  }
  /** Whether `encoded` survives JSON unchanged (a nesting too deep to walk says nothing). */
  const exact = (encoded: unknown): boolean => {
    try {
      return JsonExact.exact(encoded)
    } catch {
      return false
    }
  }
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
    decode: (text) => Either.flatMap(parse(text), decode),
    store: (value) => {
      const encoded = encode(value)
      if (Either.isLeft(encoded)) return Either.left({ _tag: "Encode", cause: encoded.left })
      // `undefined` for an encoded `undefined` or function: no text, which reads back as nothing.
      let text: string | undefined
      try {
        // A finite number's JSON is its `String` (without the serializer's setup).
        text = typeof encoded.right === "number" && Number.isFinite(encoded.right) ? String(encoded.right) : JSON.stringify(encoded.right)
      } catch (e) {
        // A value JSON rejects (a bigint, a cycle): the Schema's encoded form is not JSON.
        return Either.left({ _tag: "Encode", cause: issue(encoded.right, e) })
      }
      if (text === undefined) return Either.left({ _tag: "ReadBack", cause: issue(encoded.right, "JSON has no text for it") })
      // Plain JSON reads back as itself: a lawful Schema's decode reads it (its encode checked it
      // against the same nodes); any other Schema decodes it, without parsing the text.
      const plain = exact(encoded.right)
      if (plain && lawful) return Either.right(text)
      const back = plain ? decode(encoded.right) : Either.flatMap(parse(text), decode)
      return Either.isLeft(back) ? Either.left({ _tag: "ReadBack", cause: back.left }) : Either.right(text)
    }
  }
}
