/**
 * The health server's module, loaded by the first run that serves the health
 * endpoints: the HTTP stack it is built on (`@effect/platform`'s router and
 * Node server, which bring undici and ws) stays out of the runs that do not,
 * which load faster and hold less memory.
 *
 * @internal
 */
import { Effect } from "effect"

/** `./healthServer.ts`, imported once. */
export const load = Effect.promise(() => import("./healthServer.ts"))
