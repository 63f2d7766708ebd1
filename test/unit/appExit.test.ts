/**
 * How the apps under test (test/apps/main.ts) and the benchmark apps
 * (bench/lib/runApp.ts) end: exit 0 for a clean stop, 1 for a failure. A
 * failure that came with interruptions (one sub-topology's run failed, the
 * others were interrupted) is a failure: the chaos harness restarts a crashed
 * instance and counts it, and a clean exit would hide the error.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Exit, FiberId } from "effect"
import { exitOf as benchExitOf } from "../../bench/lib/runApp.ts"
import { exitOf } from "../apps/main.ts"

const fiber = FiberId.make(1, 0)

describe("an app's exit code", () => {
  for (const [name, decide] of [["test/apps/main.ts", exitOf], ["bench/lib/runApp.ts", benchExitOf]] as const) {
    it(`${name}: 0 when the program ends or is interrupted, 1 when it fails, interrupted fibers beside it or not`, () => {
      assert.strictEqual(decide(Exit.void), 0)
      assert.strictEqual(decide(Exit.interrupt(fiber)), 0)
      assert.strictEqual(decide(Exit.fail("boom")), 1)
      assert.strictEqual(decide(Exit.failCause(Cause.parallel(Cause.fail("boom"), Cause.interrupt(fiber)))), 1)
      assert.strictEqual(decide(Exit.failCause(Cause.sequential(Cause.interrupt(fiber), Cause.die("defect")))), 1)
    })
  }
})
