/**
 * Names for the documentation's one-line examples about records (```ts prelude=records):
 * an output topic `Out`, a `key` and `value` for it, and an input `record`.
 */
import { Schema } from "effect"
import { Topic, type Transformer } from "skein"

export { Topic }
export const Out = Topic.make({ name: "out", key: Schema.String, value: Schema.String })
export declare const key: string
export declare const value: string
export declare const record: Transformer.InputRecord<string, string>
