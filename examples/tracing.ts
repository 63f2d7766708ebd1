/**
 * Tracing to an OpenTelemetry collector, end to end: starts a Kafka broker (or
 * uses KAFKA_BROKERS), produces words (one with a `traceparent` header, as an
 * instrumented upstream service would write it), runs the word count with
 * `@effect/opentelemetry`'s NodeSdk, and exports Skein's spans over OTLP/HTTP.
 *
 * Configured by the standard OpenTelemetry variables, read by the SDK itself:
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (e.g. `http://localhost:4318`, a collector or
 * Jaeger), `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`,
 * `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`. Without an endpoint the
 * spans are printed to the console instead.
 *
 *   OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 OTEL_SERVICE_NAME=word-count npm run example:tracing
 */
import { NodeSdk } from "@effect/opentelemetry"
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http"
import { BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Fiber, Layer, Option, Schema } from "effect"
import kafkajs from "kafkajs"
import { Runner, SkeinConfig, Topic, Transformer } from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"

const run = `${Date.now()}`
const Words = Topic.make({ name: `traced-words-${run}`, key: Schema.String, value: Schema.String })
const Counts = Topic.make({ name: `traced-counts-${run}`, key: Schema.String, value: Topic.json(Schema.Number) })

const WordCount = Transformer.make({
  name: "word-count",
  inputs: [Words],
  state: Schema.Number,
  transform: (record, count) => {
    const next = Option.getOrElse(count, () => 0) + 1
    return Effect.succeed({ emit: [Topic.record(Counts, record.key, next)], state: Transformer.set(next) })
  }
})

/** The upstream service's trace: the word "fox" continues it. */
export const upstreamTraceId = "4bf92f3577b34da6a3ce929d0e0e4736"
const upstream = `00-${upstreamTraceId}-00f067aa0ba902b7-01`

const endpoint = process.env["OTEL_EXPORTER_OTLP_ENDPOINT"] ?? process.env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]

/** OTLP/HTTP when an endpoint is configured (the exporter reads the OTEL_* variables), else the console. */
const Tracing = NodeSdk.layer(() => ({
  resource: { serviceName: process.env["OTEL_SERVICE_NAME"] ?? "skein-word-count" },
  spanProcessor: endpoint === undefined
    ? new SimpleSpanProcessor(new ConsoleSpanExporter())
    : new BatchSpanProcessor(new OTLPTraceExporter())
}))

const words = ["the", "quick", "fox", "the", "fox"]

const program = Effect.gen(function*() {
  const { brokers, kind } = yield* KafkaBroker.KafkaBroker
  yield* Effect.log(`Kafka (${kind}) at ${brokers.join(",")}; spans to ${endpoint ?? "the console"}`)
  const kafka = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  yield* Effect.promise(() => admin.connect())
  yield* Effect.promise(() =>
    admin.createTopics({ waitForLeaders: true, topics: [Words.name, Counts.name].map((topic) => ({ topic, numPartitions: 1 })) })
  )
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  yield* Effect.promise(() =>
    producer.send({
      topic: Words.name,
      acks: -1,
      messages: words.map((word, i) => ({ key: word, value: word, headers: i === 2 ? { traceparent: upstream } : {} }))
    })
  )
  yield* Effect.promise(() => producer.disconnect())

  const runner = yield* Effect.fork(
    Runner.run(WordCount).pipe(
      Effect.provide(SkeinConfig.layer({ applicationId: `traced-${run}`, brokers, stateDir: ".skein/example-state" }))
    )
  )
  const counted: Array<string> = []
  const consumer = kafka.consumer({ groupId: `reader-${run}`, readUncommitted: false })
  yield* Effect.promise(() => consumer.connect())
  yield* Effect.promise(() => consumer.subscribe({ topics: [Counts.name], fromBeginning: true }))
  yield* Effect.promise(() =>
    consumer.run({
      eachMessage: async ({ message }) => {
        counted.push(`${message.key?.toString()}=${message.value?.toString()} traceparent ${message.headers?.["traceparent"]?.toString()}`)
      }
    })
  )
  while (counted.length < words.length) yield* Effect.sleep("200 millis")
  yield* Effect.promise(() => consumer.disconnect())
  yield* Fiber.interrupt(runner)
  yield* Effect.promise(() => admin.disconnect())
  console.log("counts (read_committed), each with the traceparent of its transform span:")
  for (const line of counted) console.log(`  ${line}`)
  // The output of "fox" continues the upstream trace: its traceparent has the upstream trace id.
})

program.pipe(
  // Closing the NodeSdk layer flushes the spans still batched.
  Effect.provide(Layer.merge(Layer.orDie(KafkaBroker.layer()), Tracing)),
  Effect.timeout("5 minutes"),
  Runner.runMain
)
