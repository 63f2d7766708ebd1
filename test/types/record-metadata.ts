/**
 * Type-level tests, checked by `npm run typecheck`: the "Headers, timestamps,
 * binary data" snippets of docs/transformers.md compile, existing text-only code keeps
 * compiling, and a Schema from bytes is not taken for a text codec.
 */
import { Effect, ParseResult, Schema } from "effect"
import protobuf from "protobufjs"
import { ErrorRule, Topic, Transformer } from "../../src/index.ts"

const OrderMessage = new protobuf.Type("Order")
  .add(new protobuf.Field("id", 1, "string"))
  .add(new protobuf.Field("cents", 2, "uint32"))
const Order = Schema.Struct({ id: Schema.String, cents: Schema.Number })

/** The codec of docs/transformers.md, verbatim. */
const OrderCodec = Topic.binary(Schema.transformOrFail(Schema.Uint8ArrayFromSelf, Order, {
  strict: false,
  decode: (bytes, _, ast) => {
    try {
      return ParseResult.succeed(OrderMessage.toObject(OrderMessage.decode(bytes), { defaults: true }))
    } catch (error) {
      return ParseResult.fail(new ParseResult.Type(ast, bytes, `not an Order: ${String(error)}`))
    }
  },
  encode: (order) => ParseResult.succeed(OrderMessage.encode(OrderMessage.fromObject(order)).finish())
}))
const Orders = Topic.make({ name: "orders", key: Schema.String, value: OrderCodec })
const Out = Topic.make({ name: "out", key: Topic.bytes, value: Topic.json(Order) })
const Text = Topic.make({ name: "text", key: Schema.String, value: Schema.String })

export const readmeOutputs = Transformer.stateless({
  name: "readme-outputs",
  inputs: [Orders],
  rules: [ErrorRule.tagged("PartitionOutOfRange", { then: "dlq" })],
  transform: (record) => {
    const key: Uint8Array = Buffer.from(record.value.id)
    const value: { readonly id: string; readonly cents: number } = record.value
    const hops: ReadonlyArray<Buffer> = Transformer.headerValues(record, "hop")
    return Effect.succeed({
      emit: [
        Topic.record(Out, key, value),
        Topic.record(Out, key, value, { source: "web", hops: [Buffer.from([1]), "2"] }),
        Topic.record(Out, key, value, [...record.rawHeaders, ["hop", Buffer.from([hops.length])]]),
        Topic.record(Out, key, value, undefined, { partition: 2, timestamp: Date.now() }),
        // text headers, as before
        Topic.record(Text, record.value.id, String(record.value.cents), record.headers)
      ]
    })
  }
})

// A Schema from bytes must be wrapped with Topic.binary: it is not a text codec.
// @ts-expect-error: Uint8ArrayFromSelf's encoded side is not text
Topic.make({ name: "raw", key: Schema.String, value: Schema.Uint8ArrayFromSelf })
