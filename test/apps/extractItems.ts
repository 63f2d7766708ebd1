/**
 * The extractor the tests run, in the test process and in `extract.ts`: it
 * reads `extractSource.ts` page by page over HTTP (@effect/platform's
 * HttpClient) and emits one record per item, keyed by token, whose value
 * names the token, the item and the cursor of the page it came from.
 */
import { HttpClient, HttpClientResponse } from "@effect/platform"
import { Duration, Effect, Schedule, Schema } from "effect"
import * as Extractor from "../../src/Extractor.ts"
import * as Topic from "../../src/Topic.ts"

export const Item = Schema.Struct({ token: Schema.String, id: Schema.Number, after: Schema.Number })
export type Item = typeof Item.Type

export const itemsTopic = (name: string) => Topic.make({ name, key: Schema.String, value: Topic.json(Item) })

export const Cursor = Schema.Struct({ after: Schema.Number })

const PageBody = Schema.Struct({
  items: Schema.Array(Schema.Struct({ id: Schema.Number })),
  hasMore: Schema.Boolean
})

export interface Options {
  readonly name: string
  readonly tokens: ReadonlyArray<string>
  readonly source: string
  readonly output: string
  readonly pageSize: number
  /** Sleep between a page's fetch and its commit (a window to kill the process in). */
  readonly delayBeforeCommit?: Duration.DurationInput
  /** Told of each page as it arrives, before that sleep: a test can freeze the process inside it. */
  readonly onFetched?: (token: string, after: number) => Effect.Effect<void>
  readonly poll?: Schedule.Schedule<unknown, unknown>
  readonly timeout?: Duration.DurationInput
  readonly retry?: Schedule.Schedule<unknown, unknown>
  readonly rateLimit?: Extractor.RateLimit
}

export const make = (options: Options) => {
  const Items = itemsTopic(options.output)
  return Extractor.make({
    name: options.name,
    tokens: options.tokens,
    cursor: Cursor,
    initial: { after: 0 },
    poll: options.poll ?? Schedule.spaced(Duration.millis(200)),
    ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
    ...(options.retry === undefined ? {} : { retry: options.retry }),
    ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }),
    read: (token, cursor) =>
      Effect.gen(function*() {
        const response = yield* HttpClient.get(
          `${options.source}/items/${encodeURIComponent(token)}?after=${cursor.after}&limit=${options.pageSize}`
        )
        const ok = yield* HttpClientResponse.filterStatusOk(response)
        const body = yield* HttpClientResponse.schemaBodyJson(PageBody)(ok)
        if (options.onFetched !== undefined) yield* options.onFetched(token, cursor.after)
        if (options.delayBeforeCommit !== undefined) yield* Effect.sleep(options.delayBeforeCommit)
        const emit = body.items.map((item) => Topic.record(Items, token, { token, id: item.id, after: cursor.after }))
        const next = { after: body.items[body.items.length - 1]?.id ?? cursor.after }
        return body.hasMore ? Extractor.page({ emit, next }) : Extractor.drained({ emit, next })
      })
  })
}
