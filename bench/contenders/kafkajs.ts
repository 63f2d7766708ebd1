/** Contender 3: plain kafkajs consume-count-produce loop (bench/apps/kafkajs-count.ts). */
import { join } from "node:path"
import { appArgs } from "./types.ts"
import type { ProcessContender } from "./types.ts"

export const kafkajsLoop: ProcessContender = {
  kind: "process",
  name: "kafkajs-loop",
  description:
    "kafkajs 2.2.4 as published (unpatched) eachBatch loop, no transactions (at-least-once), in-memory Map, commit after acks; Node, 1 thread",
  hasState: false,
  setup: async () => ({ ok: true }),
  command: (s) => ({
    cmd: process.execPath,
    args: [
      "--import",
      "tsx",
      join("bench", "apps", "kafkajs-count.ts"),
      ...appArgs(s, { stateful: false }),
    ],
  }),
}
