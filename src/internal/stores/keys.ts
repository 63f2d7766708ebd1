/**
 * The layout of a transformer's named stores (`KeyValueStore`, `WindowStore`,
 * `SessionStore`) in its task's store, beside the per-key state and the
 * timers, under Skein's reserved `\u0000skein.` keys:
 *
 * - `\u0000skein.store.{name}\u0000{entry}`: an entry of store `name` (the
 *   encoded key, with a window's or a session's times after it).
 * - `\u0000skein.store-schema.{name}`: what the store was declared with (its
 *   kind and Schemas), checked at the task's first batch.
 *
 * Order: LevelDB orders keys by their UTF-8 bytes, which is code point order
 * (not JavaScript's `<`, which orders UTF-16 code units: an emoji sorts
 * after U+FFFD in UTF-8 but before it in UTF-16). `compare` is that order,
 * for the entries a batch has not committed yet.
 *
 * Pure.
 *
 * @internal
 */
import { reservedPrefix } from "../runtime/timers.ts"

const entryPrefix = `${reservedPrefix}store.`
const schemaPrefix = `${reservedPrefix}store-schema.`

/** The first store key of store `name`: every entry of it starts with this. */
export const namespace = (name: string): string => `${entryPrefix}${name}\u0000`

/** A store key past every entry of store `name` (store names hold no `\u0000`). */
export const namespaceEnd = (name: string): string => `${entryPrefix}${name}\u0001`

/** The store key of the declaration of store `name`. */
export const schemaKey = (name: string): string => `${schemaPrefix}${name}`

/** A UTF-16 surrogate without its pair: a string that has it has no UTF-8 form. */
const loneSurrogate = /\p{Surrogate}/u

/** True when `text` has a UTF-8 form (no lone surrogate): encoded keys must. */
export const wellFormed = (text: string): boolean => !loneSurrogate.test(text)

/** Why `name` cannot name a store, or `undefined`. */
export const invalidName = (name: string): string | undefined =>
  name.length === 0
    ? "a store's name must not be empty"
    : name.includes("\u0000")
    ? `the store name ${JSON.stringify(name)} holds a NUL character (\\u0000), which Skein uses to end a store's name: remove it`
    : loneSurrogate.test(name)
    ? `the store name ${JSON.stringify(name)} holds a lone surrogate, which has no UTF-8 form: remove it`
    : undefined

/** A UTF-16 code unit weighed so that comparing weights compares code points (surrogates are the astral ones). */
const weight = (unit: number): number => unit >= 0xd800 && unit <= 0xdfff ? unit + 0x10000 : unit

/** Compares two well-formed strings by their UTF-8 bytes (LevelDB's order). */
export const compare = (a: string, b: string): number => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x !== y) return weight(x) - weight(y)
  }
  return a.length - b.length
}

/**
 * The least string greater than every string that starts with `prefix`
 * (its last code point incremented, U+10FFFF ones dropped): the exclusive
 * end of a prefix scan. `undefined` when there is none (an empty prefix, or
 * one of U+10FFFF only): the scan runs to the end of its store.
 */
export const prefixEnd = (prefix: string): string | undefined => {
  const points = [...prefix]
  for (let i = points.length - 1; i >= 0; i--) {
    const last = points[i]?.codePointAt(0) ?? 0x10ffff
    if (last < 0x10ffff) {
      const next = last + 1 === 0xd800 ? 0xe000 : last + 1
      return points.slice(0, i).join("") + String.fromCodePoint(next)
    }
  }
  return undefined
}

/** Hex digits of a time: 16, zero padded, so that text order is number order. */
const timeDigits = 16

/** Why `time` cannot be stored as a window's or a session's time, or `undefined`. */
export const invalidTime = (what: string, time: number): string | undefined =>
  Number.isSafeInteger(time) && time >= 0
    ? undefined
    : `${what} is ${time}: a window's or a session's time must be an integer number of epoch milliseconds, 0 or more`

/** A time (a safe integer, 0 or more) as fixed-width hex text that sorts as the number does. */
export const encodeTime = (time: number): string => time.toString(16).padStart(timeDigits, "0")

/** The time `encodeTime` wrote at `offset` of `text`. */
export const decodeTime = (text: string, offset: number): number => Number.parseInt(text.slice(offset, offset + timeDigits), 16)

/** The width of an encoded time. */
export const timeWidth = timeDigits

/** The greatest encoded time (every encoded time sorts at or below it). */
export const maxTime = "f".repeat(timeDigits)
