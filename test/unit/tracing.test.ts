import { assert, describe, it } from "@effect/vitest"
import { Effect, Tracer } from "effect"
import type { FetchedHeaders, FetchedRecord } from "../../src/internal/kafka/consumer.ts"
import * as Tracing from "../../src/internal/runtime/tracing.ts"

const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
const span = "00f067aa0ba902b7"

const record = (rawHeaders: FetchedHeaders): FetchedRecord => ({
  topic: "in",
  partition: 0,
  offset: 1,
  key: null,
  value: null,
  headers: {},
  rawHeaders,
  timestamp: -1
})

const parse = (text: string) => Tracing.parseTraceparent(Buffer.from(text, "latin1"))

describe("traceparent", () => {
  it("parses W3C trace context, version 00 and later ones", () => {
    const parsed = parse(`00-${trace}-${span}-01`)
    assert.deepStrictEqual([parsed?._tag, parsed?.traceId, parsed?.spanId, parsed?.sampled], ["ExternalSpan", trace, span, true])
    assert.strictEqual(parse(`00-${trace}-${span}-00`)?.sampled, false)
    assert.strictEqual(parse(`00-${trace}-${span}-03`)?.sampled, true, "other flags: only the sampled bit counts")
    assert.strictEqual(parse(`01-${trace}-${span}-01-more`)?.traceId, trace, "a later version may append fields")
    assert.strictEqual(parse(`01-${trace}-${span}-01`)?.traceId, trace)
  })

  it("ignores malformed values", () => {
    for (
      const bad of [
        "",
        "garbage",
        `00-${trace}-${span}-01-extra`, // version 00 has exactly four fields
        `00-${trace.toUpperCase()}-${span}-01`,
        `00-${"0".repeat(32)}-${span}-01`,
        `00-${trace}-${"0".repeat(16)}-01`,
        `ff-${trace}-${span}-01`,
        `0g-${trace}-${span}-01`,
        `00-${trace}-${span}-0x`,
        `00_${trace}_${span}_01`,
        `01-${trace}-${span}-01x`
      ]
    ) assert.isUndefined(parse(bad), bad)
  })

  it("reads a record's header only when it is there once", () => {
    const value = Buffer.from(`00-${trace}-${span}-01`)
    assert.strictEqual(Tracing.remoteParent(record({ traceparent: value }))?.spanId, span)
    assert.isUndefined(Tracing.remoteParent(record({})))
    assert.isUndefined(Tracing.remoteParent(record({ traceparent: null })))
    assert.isUndefined(Tracing.remoteParent(record({ traceparent: [value, value] })), "repeated: invalid")
  })
})

describe("trace headers on outputs", () => {
  const input = Buffer.from(`00-${trace}-${span}-01`)
  const state = Buffer.from("vendor=opaque")
  const spanOf = (traceId: string, spanId: string, sampled = true): Tracer.Span => ({ traceId, spanId, sampled }) as Tracer.Span
  const headers = Tracing.traceHeaders(spanOf(trace, "1111111111111111"), record({ traceparent: input, tracestate: state }))!
  const out = { topic: "out", key: null, value: "v" }

  it("writes the span's traceparent and the input's tracestate", () => {
    assert.deepStrictEqual(Tracing.withTraceHeaders(out, headers).headers, {
      traceparent: `00-${trace}-1111111111111111-01`,
      tracestate: state
    })
    const unsampled = Tracing.traceHeaders(spanOf(trace, "1111111111111111", false), record({}))!
    assert.deepStrictEqual(Tracing.withTraceHeaders(out, unsampled).headers, { traceparent: `00-${trace}-1111111111111111-00` })
  })

  it("keeps a traceparent the transform set; replaces one copied from the input", () => {
    const own = { ...out, headers: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01" } }
    assert.strictEqual(Tracing.withTraceHeaders(own, headers), own)
    const copied = { ...out, headers: { traceparent: input, tracestate: state, other: "x" } }
    assert.deepStrictEqual(Tracing.withTraceHeaders(copied, headers).headers, {
      traceparent: `00-${trace}-1111111111111111-01`,
      tracestate: state,
      other: "x"
    })
    const copiedText = { ...out, headers: { traceparent: input.toString() } }
    assert.strictEqual(Tracing.withTraceHeaders(copiedText, headers).headers?.["traceparent"], `00-${trace}-1111111111111111-01`)
    const ownState = { ...out, headers: { tracestate: "mine=1" } }
    assert.strictEqual(Tracing.withTraceHeaders(ownState, headers).headers?.["tracestate"], "mine=1")
  })

  it.effect("writes nothing for spans without W3C ids, nor under Effect's default tracer", () =>
    Effect.gen(function*() {
      assert.isUndefined(Tracing.traceHeaders(spanOf("native", "noop"), record({})))
      assert.isFalse(Tracing.propagates(yield* Effect.tracer))
      const installed = Tracer.make({ span: () => undefined as never, context: (f) => f() })
      assert.isTrue(Tracing.propagates(yield* Effect.withTracer(Effect.tracer, installed)))
    }))
})
