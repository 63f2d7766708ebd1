/**
 * Names for docs/streams.md's short examples (```ts prelude=streams): an `Orders` topic keyed
 * by customer, whose orders carry an event time (`placedAt`).
 */
import { Schema } from "effect"
import { KStream, Topic } from "skein"

export { KStream }
export const Order = Schema.Struct({ customer: Schema.String, amount: Schema.Number, placedAt: Schema.Number })
export const Orders = Topic.make({ name: "orders", key: Schema.String, value: Topic.json(Order) })
