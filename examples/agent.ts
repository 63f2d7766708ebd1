/**
 * An LLM agent on Kafka with a real provider, end to end: starts a Kafka
 * broker (or uses KAFKA_BROKERS), produces customers' questions about their
 * orders, answers each with a KafkaAgent (OpenAI through `@effect/ai-openai`,
 * with a tool that looks orders up), and reads the answers back
 * read_committed. Each LLM turn and each tool call is a durable step: a crash
 * mid-run resumes without calling the model or the tool again for what was
 * stored, and an answered question is never answered twice.
 *
 *   OPENAI_API_KEY=... npm run example:agent
 *
 * OPENAI_MODEL picks the model (default gpt-4o-mini); OPENAI_API_URL an
 * OpenAI-compatible endpoint (default https://api.openai.com/v1). Without
 * OPENAI_API_KEY it says what to set and exits 0, contacting nothing.
 *
 * The provider is a layer the program supplies, like any other service: the
 * tests give the same agent a scripted `LanguageModel` instead
 * (test/helpers/scriptedModel.ts).
 */
import { Tool, Toolkit } from "@effect/ai"
import { OpenAiClient, OpenAiLanguageModel } from "@effect/ai-openai"
import { NodeHttpClient } from "@effect/platform-node"
import { Config, Console, Effect, Fiber, Layer, Option, Redacted, Schedule, Schema } from "effect"
import kafkajs from "kafkajs"
import { ErrorRule, KafkaAgent, Runner, SkeinConfig, Topic } from "../src/index.ts"
import { KafkaBroker } from "../src/testing/index.ts"

const run = `${Date.now()}`

const Question = Schema.Struct({ customer: Schema.String, order: Schema.String, text: Schema.String })
const Questions = KafkaAgent.topic(`questions-${run}`, Question)
const Answers = Topic.make({ name: `answers-${run}`, key: Schema.String, value: Topic.json(KafkaAgent.Answer) })
const deadLetters = `questions-dead-letters-${run}`

/** The tool the model may call; its handler is a stand-in for an order service. */
const OrderStatus = Tool.make("OrderStatus", {
  description: "Looks up an order: its status, carrier and expected delivery date",
  parameters: { order: Schema.String },
  success: Schema.Struct({ status: Schema.String, carrier: Schema.String, eta: Schema.String }),
  failure: Schema.Struct({ error: Schema.String }),
  failureMode: "return" // an unknown order is shown to the model, not a failed record
})
const OrderTools = Toolkit.make(OrderStatus)

const orders = new Map([
  ["A-1001", { status: "shipped", carrier: "DHL", eta: "2026-12-04" }],
  ["A-1002", { status: "packing", carrier: "UPS", eta: "2026-12-06" }]
])
const OrderHandlers = OrderTools.toLayer({
  OrderStatus: ({ order }) => {
    const found = orders.get(order)
    return found === undefined ? Effect.fail({ error: `no order ${order}` }) : Effect.succeed(found)
  }
})

export const Support = KafkaAgent.make({
  name: "support",
  input: Questions,
  payload: Question,
  system: "You answer customers' questions about their orders in one or two sentences. " +
    "Look orders up with the OrderStatus tool; never guess a status or a date.",
  prompt: (q) => `Customer ${q.customer} asks about order ${q.order}: ${q.text}`,
  toolkit: OrderTools,
  maxTurns: 4,
  emit: (answer, record) => [Topic.record(Answers, record.key, answer)],
  rules: [
    // the provider's rate limits and outages: retried, then dead-lettered with the error
    ErrorRule.tagged("HttpResponseError", {
      retry: Schedule.exponential("1 second").pipe(Schedule.intersect(Schedule.recurs(3))),
      then: "dlq"
    }),
    ErrorRule.tagged("AgentMaxTurnsExceeded", { then: "dlq" })
  ]
})

const questions = [
  { customer: "ada", order: "A-1001", text: "Where is my parcel, and when will it arrive?" },
  { customer: "linus", order: "A-1002", text: "Has my order shipped yet?" },
  { customer: "grace", order: "A-9999", text: "Can you check my order?" }
]

/** OpenAI as the agent's language model; the key stays `Redacted` from the environment to the request. */
const OpenAi = Layer.unwrapEffect(Effect.gen(function*() {
  const model = yield* Config.string("OPENAI_MODEL").pipe(Config.withDefault("gpt-4o-mini"))
  return OpenAiLanguageModel.layer({ model }).pipe(
    Layer.provide(OpenAiClient.layerConfig({
      apiKey: Config.redacted("OPENAI_API_KEY"),
      apiUrl: Config.string("OPENAI_API_URL").pipe(Config.withDefault("https://api.openai.com/v1"))
    })),
    Layer.provide(NodeHttpClient.layerUndici)
  )
}))

const program = Effect.gen(function*() {
  const { brokers, kind } = yield* KafkaBroker.KafkaBroker
  yield* Effect.log(`Kafka (${kind}) at ${brokers.join(",")}, run ${run}`)
  const kafka = new kafkajs.Kafka({ brokers: [...brokers], logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  yield* Effect.promise(() => admin.connect())
  yield* Effect.promise(() =>
    admin.createTopics({
      waitForLeaders: true,
      topics: [Questions.name, Answers.name, deadLetters].map((topic) => ({ topic, numPartitions: 1 }))
    })
  )
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  yield* Effect.promise(() => producer.connect())
  yield* Effect.promise(() =>
    producer.send({
      topic: Questions.name,
      acks: -1,
      messages: questions.map((q) => ({ key: q.customer, value: JSON.stringify(q) }))
    })
  )
  yield* Effect.promise(() => producer.disconnect())

  const config = SkeinConfig.layer({
    applicationId: `support-${run}`,
    brokers,
    stateDir: ".skein/example-state",
    deadLetterTopic: deadLetters
  })
  const agent = yield* Effect.fork(Runner.run(Support).pipe(Effect.provide([config, OrderHandlers, OpenAi])))

  // Read the answers (and any dead letters) back, read_committed, until every question has one.
  const answers = new Map<string, string>()
  const consumer = kafka.consumer({ groupId: `reader-${run}`, readUncommitted: false })
  yield* Effect.promise(() => consumer.connect())
  yield* Effect.promise(() => consumer.subscribe({ topics: [Answers.name, deadLetters], fromBeginning: true }))
  yield* Effect.promise(() =>
    consumer.run({
      eachMessage: async ({ message, topic }) => {
        const customer = message.key?.toString() ?? ""
        if (topic === deadLetters) {
          answers.set(customer, `(dead letter) ${message.headers?.["skein.error"]?.toString() ?? ""}`)
        } else {
          const answer = Schema.decodeUnknownSync(Topic.json(KafkaAgent.Answer))(message.value?.toString() ?? "")
          const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`
          answers.set(customer, `${answer.text}\n    (${plural(answer.turns, "LLM turn")}, ${plural(answer.toolCalls, "tool call")})`)
        }
      }
    })
  )
  while (answers.size < questions.length) {
    yield* Effect.sleep("200 millis")
  }
  yield* Effect.promise(() => consumer.disconnect())
  yield* Fiber.interrupt(agent)
  yield* Effect.promise(() => admin.disconnect())
  console.log(`read back ${answers.size} committed answers:`)
  for (const q of questions) console.log(`  ${q.customer} (${q.order}): ${q.text}\n    ${answers.get(q.customer)}`)
})

const main = Effect.gen(function*() {
  const key = yield* Config.option(Config.redacted("OPENAI_API_KEY"))
  if (Option.isNone(key) || Redacted.value(key.value).trim() === "") {
    yield* Console.log(
      "examples/agent.ts calls OpenAI and needs an API key: set OPENAI_API_KEY (and optionally OPENAI_MODEL, " +
        "default gpt-4o-mini), e.g.\n  OPENAI_API_KEY=... npm run example:agent\n" +
        "Skipped: no broker was started and nothing was contacted. The same agent runs in the tests with a " +
        "scripted model (npx vitest run test/agent/)."
    )
    return
  }
  yield* program.pipe(Effect.provide(Layer.orDie(KafkaBroker.layer())))
})

main.pipe(
  Effect.timeout("5 minutes"),
  Runner.runMain // Ctrl-C: the run stops gracefully; exit code 0, or 1 on a failure
)
