/**
 * What the in-process micro-benchmarks (bench/batch.ts, bench/windowed-batch.ts) share: loading
 * Skein's modules from the sources or from a build, and a state store that holds nothing.
 */
import { Effect } from "effect"
import * as path from "node:path"
import * as url from "node:url"
import type { StateStore } from "../../src/internal/stores/StateStore.ts"

/**
 * The specifier of a Skein module (`internal/batch`, `index`): the sources through tsx, or (`dist`
 * given) a build of them, what users run (`npm run build` writes dist/): tsx wraps every named
 * function it compiles in a `__name` call, a cost per closure made per record that the build does
 * not have. Two builds give an A/B.
 */
export const moduleFrom = (dist: string | undefined) => (module: string): string =>
  dist === undefined ? `../src/${module}.ts` : url.pathToFileURL(path.join(path.resolve(dist), `${module}.js`)).href

/** A store that holds nothing: every read is absent, every write is dropped. */
export const emptyStore = (StateStoreError: typeof import("../../src/SkeinError.ts").StateStoreError): StateStore => ({
  path: "(memory)",
  get: () => Effect.succeed(undefined),
  getMany: (wanted) => Effect.succeed(wanted.map(() => undefined)),
  write: () => Effect.void,
  replay: () => Effect.void,
  checkpoint: Effect.succeed("missing"),
  clear: Effect.void,
  count: Effect.succeed(0),
  keys: () => Effect.fail(new StateStoreError({ operation: "keys", path: "(memory)", cause: "unused" })),
  entries: () => Effect.fail(new StateStoreError({ operation: "entries", path: "(memory)", cause: "unused" })),
  range: () => Effect.fail(new StateStoreError({ operation: "range", path: "(memory)", cause: "unused" }))
})
