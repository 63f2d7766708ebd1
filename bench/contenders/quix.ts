/**
 * Contender 5: Quix Streams, processing_guarantee="exactly-once", stateful apply over its
 * RocksDB store with a changelog (bench/peers/quix/quix_count.py), in bench/.venv.
 */
import { join } from "node:path"
import { pythonVenv } from "../lib/setup.ts"
import { appArgs } from "./types.ts"
import type { ProcessContender, SetupContext } from "./types.ts"

let python: string | undefined

export const quixStreams: ProcessContender = {
  kind: "process",
  name: "quix-streams-eos",
  description: "Quix Streams 3.28.1 (confluent-kafka/librdkafka), exactly-once, stateful apply (RocksDB + changelog); Python, 1 thread",
  hasState: true,
  setup: async (ctx: SetupContext) => {
    const venv = join(ctx.root, "bench", ".venv")
    const r = await pythonVenv(venv, join(ctx.root, "bench", "peers", "quix", "requirements.txt"), ctx.log)
    if (!r.ok) return r
    python = join(venv, "bin", "python")
    return { ok: true }
  },
  command: (s) => {
    if (python === undefined) throw new Error("quix: setup() not run")
    return {
      cmd: python,
      args: [
        "-u",
        join("bench", "peers", "quix", "quix_count.py"),
        ...appArgs(s, { stateful: true }),
        "--mode",
        "eos",
        ...(s.clientConfig === undefined ? [] : ["--client-config", s.clientConfig.librdkafka]),
      ],
    }
  },
}
