/** A temporary folder for a test's scope (a state directory, say), removed when the scope closes. */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** Makes a folder named `prefix` plus a random suffix under the OS's temp folder; the scope's end removes it. */
export const tempDir = (prefix: string) =>
  Effect.gen(function*() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
    yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
    return dir
  })
