/**
 * kafkajs as published and as patched, side by side in one test file: a copy of each made before
 * the file's tests and removed after them. A helper of the test runner's (it registers
 * `beforeAll`/`afterAll`); `kafkajsCopies.ts`, which the benchmark's apps load too, stays free of it.
 */
import { afterAll, beforeAll } from "@effect/vitest"
import { copyKafkajs, type KafkajsCopy } from "./kafkajsCopies.ts"

/** Both sides of the patch, each a copy of its own: made before a file's tests, removed after them. */
export interface SideBySide {
  readonly original: KafkajsCopy
  readonly patched: KafkajsCopy
}

/** Registers the copies' making (`beforeAll`) and removal (`afterAll`) for the calling test file. */
export const sideBySide = (): SideBySide => {
  let original: KafkajsCopy | undefined
  let patched: KafkajsCopy | undefined
  beforeAll(() => {
    original = copyKafkajs("original")
    patched = copyKafkajs("patched")
  })
  afterAll(() => {
    original?.remove()
    patched?.remove()
  })
  const made = (copy: KafkajsCopy | undefined): KafkajsCopy => {
    if (copy === undefined) throw new Error("the kafkajs copies are made before the file's tests run (beforeAll)")
    return copy
  }
  return {
    get original() {
      return made(original)
    },
    get patched() {
      return made(patched)
    }
  }
}
