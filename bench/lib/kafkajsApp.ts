/**
 * What the kafkajs contender apps share (bench/apps/kafkajs-*.ts): kafkajs loaded from a private
 * copy with one side of Skein's patch, the count apps' arguments, and the contender protocol's events.
 */
import { parseArgs } from "node:util"
import type * as KafkaJS from "kafkajs"
import type { KafkaMessage, Message } from "kafkajs"
import { copyKafkajs, type Side } from "../../test/helpers/kafkajsCopies.ts"

/** kafkajs as published ("original") or as Skein patches it ("patched"): a private copy, removed at exit. */
export const loadKafkajs = (side: Side): typeof KafkaJS => {
  const copy = copyKafkajs(side)
  process.on("exit", () => copy.remove())
  process.env["KAFKAJS_NO_PARTITIONER_WARNING"] = "1"
  // The copy's entry point is kafkajs's own index.js: its exports are the package's.
  return copy.load("index.js") as typeof KafkaJS
}

/** A count app's arguments (`appArgs` of bench/contenders/types.ts; the stateful ones are accepted and unused), or exit 2 with `usage`. */
export const countArgs = (usage: string): { readonly brokers: string; readonly input: string; readonly output: string; readonly group: string } => {
  const { values } = parseArgs({
    options: {
      brokers: { type: "string" },
      input: { type: "string" },
      output: { type: "string" },
      group: { type: "string" },
      "state-dir": { type: "string" },
      "commit-interval-ms": { type: "string" },
    },
  })
  const { brokers, input, output, group } = values
  if (brokers === undefined || input === undefined || output === undefined || group === undefined) {
    console.error(`usage: ${usage}`)
    process.exit(2)
  }
  return { brokers, input, output, group }
}

/** A contender protocol event on stdout (bench/contenders/types.ts). */
export const emit = (event: string): void => console.log(JSON.stringify({ event, ts: Date.now() }))

/**
 * The count of a kafkajs count app: a fetched batch's messages counted per key in `counts`, one
 * output a message (value: the key's count so far); the first batch emits `first-read`.
 */
export const makeCounter = (): ((messages: ReadonlyArray<KafkaMessage>) => Array<Message>) => {
  const counts = new Map<string, number>()
  let first = true
  return (messages) => {
    if (first) {
      first = false
      emit("first-read")
    }
    const out: Array<Message> = new Array(messages.length)
    let i = 0
    for (const m of messages) {
      const key = m.key?.toString() ?? ""
      const c = (counts.get(key) ?? 0) + 1
      counts.set(key, c)
      out[i++] = { key, value: String(c) }
    }
    return out
  }
}
