/**
 * Strict UTF-8 without a view of the bytes (`strictTextOf`): `Buffer`'s lenient decoding, checked
 * for U+FFFD, must give exactly what the strict `TextDecoder` gives, and `undefined` wherever it
 * throws, for any bytes at any place in a buffer.
 */
import { assert, describe, it } from "@effect/vitest"
import { strictText, strictTextOf } from "../../src/internal/codec/utf8.ts"
import { seeded } from "../helpers/seeded.ts"

const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
const expected = (bytes: Uint8Array): string | undefined => {
  try {
    return strict.decode(bytes)
  } catch {
    return undefined
  }
}


/** `bytes` inside a larger buffer, read by `strictTextOf` where they lie, and by `strictText` whole. */
const check = (bytes: ReadonlyArray<number>, label: string): void => {
  const view = Buffer.from(bytes)
  const framed = Buffer.concat([Buffer.from([0xc3, 0x61]), view, Buffer.from([0xa9, 0x80])])
  const want = expected(view)
  assert.strictEqual(strictTextOf(framed, 2, 2 + view.length), want, `strictTextOf ${label}`)
  assert.strictEqual(strictText(view), want, `strictText ${label}`)
  assert.strictEqual(strictText(new Uint8Array(view)), want, `strictText of a Uint8Array ${label}`)
}

describe("strict UTF-8", () => {
  it("the sequences a lenient decoder replaces are refused; a sent U+FFFD and a byte order mark are kept", () => {
    const cases: ReadonlyArray<readonly [string, ReadonlyArray<number>]> = [
      ["empty", []],
      ["ascii", [0x6b, 0x65, 0x79, 0x2d, 0x31]],
      ["two, three and four bytes", [0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80]],
      ["a sent U+FFFD", [0x61, 0xef, 0xbf, 0xbd, 0x62]],
      ["a byte order mark", [0xef, 0xbb, 0xbf, 0x61]],
      ["a lone continuation byte", [0x61, 0x80]],
      ["a truncated sequence", [0xe2, 0x82]],
      ["a truncated sequence before ascii", [0xf0, 0x9f, 0x98, 0x61]],
      ["an overlong slash", [0xc0, 0xaf]],
      ["an overlong three-byte", [0xe0, 0x80, 0xaf]],
      ["a surrogate", [0xed, 0xa0, 0x80]],
      ["past U+10FFFF", [0xf4, 0x90, 0x80, 0x80]],
      ["0xFF", [0xff]],
      ["0xF8 five-byte lead", [0xf8, 0x88, 0x80, 0x80, 0x80]],
      ["a sent U+FFFD and an invalid byte", [0xef, 0xbf, 0xbd, 0xff]]
    ]
    for (const [label, bytes] of cases) check(bytes, label)
  })

  it("agrees with the strict decoder on random bytes", () => {
    const seed = 30
    const next = seeded(seed)
    // Mostly high bytes and well-formed pieces, so sequences are often almost valid.
    const pieces: ReadonlyArray<ReadonlyArray<number>> = [
      [0x61], [0xc3, 0xa9], [0xe2, 0x82, 0xac], [0xf0, 0x9f, 0x98, 0x80], [0xef, 0xbf, 0xbd], [0xef, 0xbb, 0xbf], [0xed, 0x9f, 0xbf]
    ]
    let invalid = 0
    for (let i = 0; i < 20_000; i++) {
      const bytes: Array<number> = []
      const length = Math.floor(next() * 12)
      for (let j = 0; j < length; j++) {
        if (next() < 0.5) bytes.push(...pieces[Math.floor(next() * pieces.length)]!)
        else bytes.push(next() < 0.7 ? 0x80 + Math.floor(next() * 128) : Math.floor(next() * 256))
      }
      if (expected(Buffer.from(bytes)) === undefined) invalid++
      check(bytes, `seed ${seed} case ${i}: ${Buffer.from(bytes).toString("hex")}`)
    }
    // Both kinds were compared: the cases are not all valid, nor all invalid.
    assert.isAbove(invalid, 1_000)
    assert.isBelow(invalid, 19_000)
  })
})
