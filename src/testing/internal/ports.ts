/**
 * Free TCP ports on the loopback interface.
 *
 * @internal
 */
import * as Net from "node:net"
import { Effect } from "effect"
import { KafkaBrokerError } from "../KafkaBrokerError.ts"

const listenOnce = (host: string): Effect.Effect<Net.Server, KafkaBrokerError> =>
  Effect.async<Net.Server, KafkaBrokerError>((resume) => {
    const server = Net.createServer()
    server.once("error", (cause) =>
      resume(Effect.fail(new KafkaBrokerError({ reason: "PortInUse", detail: `no free port on ${host}`, cause }))))
    server.listen({ host, port: 0, exclusive: true }, () => resume(Effect.succeed(server)))
  })

const close = (server: Net.Server): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    server.close(() => resume(Effect.void))
  })

/**
 * `count` distinct ports that were free a moment ago. Another process can
 * still take one before the broker binds it: callers retry on `PortInUse`.
 */
export const freePorts = (host: string, count: number): Effect.Effect<ReadonlyArray<number>, KafkaBrokerError> =>
  Effect.scoped(
    Effect.forEach(Array.from({ length: count }), () =>
      Effect.acquireRelease(listenOnce(host), close).pipe(
        Effect.map((server) => {
          const address = server.address()
          return typeof address === "object" && address !== null ? address.port : 0
        })
      ))
  )
