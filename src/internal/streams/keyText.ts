/**
 * A record key as text and back, with its topic's key codec: a windowed
 * aggregation keeps the key of each open window in its task's state, to
 * emit the window's final result when a record of another key closes it.
 * A text codec's encoded form is the text; a binary codec's is base64.
 *
 * @internal
 */
import { Either, Schema } from "effect"
import type { ParseResult } from "effect"
import * as Topic from "../../Topic.ts"

export interface KeyText {
  readonly encode: (key: unknown) => Either.Either<string, ParseResult.ParseError>
  readonly decode: (text: string) => Either.Either<unknown, ParseResult.ParseError>
}

/** The key text of keys typed `K` by `codec`. */
export const make = <K>(codec: Topic.AnyCodec<K>): KeyText => {
  if (Topic.isBinary(codec)) {
    const encode = Schema.encodeEither(codec.schema)
    const decode = Schema.decodeEither(codec.schema)
    return {
      // The key was typed `K` by the operators that read it from this topic.
      encode: (key) => Either.map(encode(key as K), (bytes) => Buffer.from(bytes).toString("base64")),
      decode: (text) => decode(new Uint8Array(Buffer.from(text, "base64")))
    }
  }
  const encode = Schema.encodeEither(codec)
  const decode = Schema.decodeEither(codec)
  return { encode: (key) => encode(key as K), decode }
}
