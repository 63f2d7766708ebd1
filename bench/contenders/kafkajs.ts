/** Contender 3: plain kafkajs consume-count-produce loop (bench/apps/kafkajs-count.ts). */
import { join } from "node:path"
import { appArgs } from "./types.ts"
import type { ProcessContender } from "./types.ts"

/** A kafkajs app of bench/apps as a contender: no state of its own, run by Node through tsx. */
const kafkajsApp = (name: string, description: string, app: string): ProcessContender => ({
  kind: "process",
  name,
  description,
  hasState: false,
  setup: async () => ({ ok: true }),
  command: (s) => ({
    cmd: process.execPath,
    args: ["--import", "tsx", join("bench", "apps", app), ...appArgs(s, { stateful: false })],
  }),
})

export const kafkajsLoop: ProcessContender = kafkajsApp(
  "kafkajs-loop",
  "kafkajs 2.2.4 as published (unpatched) eachBatch loop, no transactions (at-least-once), in-memory Map, commit after acks; Node, 1 thread",
  "kafkajs-count.ts",
)

/**
 * A ceiling (issue 36 item 3a): the count as a bare exactly-once loop on the kafkajs Skein runs on,
 * with its patch, and no Skein (bench/apps/kafkajs-eos-count.ts).
 */
export const kafkajsEosFloor: ProcessContender = kafkajsApp(
  "kafkajs-eos-floor",
  "kafkajs 2.2.4 with Skein's patch, bare eachBatch loop, one transaction per fetched batch on a transactional producer per partition (outputs, offsets), in-memory Map, no changelog or store; Node, 1 thread",
  "kafkajs-eos-count.ts",
)
