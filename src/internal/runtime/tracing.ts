/**
 * Tracing through Effect's tracer: the span options Skein uses, and W3C trace
 * context (`traceparent`, `tracestate`) read from input records and written
 * to a transform's outputs.
 *
 * Spans are Effect spans (`Effect.withSpan`), so whatever tracer the program
 * installs (`@effect/opentelemetry`'s, or any `Tracer.Tracer`) receives them.
 * Without one, Effect's default native tracer keeps them in memory only;
 * then no trace context is written to outputs (`propagates`).
 *
 * A record's `traceparent` is parsed only when the header exists; a malformed
 * one (or a repeated one, which W3C Trace Context forbids) is ignored: the
 * record's transform span is then a child of its batch span, as without one.
 *
 * @internal
 */
import { Context, Effect } from "effect"
import type { Tracer } from "effect"
import type * as Topic from "../../Topic.ts"
import type { FetchedRecord } from "../kafka/consumer.ts"

/** Effect's default tracer (in-process spans, exported nowhere). */
const nativeTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/** True when `tracer` is one a program installed, not Effect's default: trace context then goes to outputs. */
export const propagates = (tracer: Tracer.Tracer): boolean => tracer !== nativeTracer

/** The header names of W3C Trace Context (lower case, as the Kafka binding writes them). */
export const traceparentHeader = "traceparent"
export const tracestateHeader = "tracestate"

/** A span link's attributes when none are given: shared, never written to. */
const noAttributes: Readonly<Record<string, unknown>> = {}

/** A link to `span` (the batch span a record's transform span continues a remote trace from). */
export const linkTo = (span: Tracer.AnySpan): Tracer.SpanLink => ({ _tag: "SpanLink", span, attributes: noAttributes })

const hex = (c: number): boolean => (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66)

/** True when `bytes[from, from + length)` is lower-case hex, not all zeros. */
const hexId = (bytes: Buffer, from: number, length: number): boolean => {
  let nonZero = false
  for (let i = from; i < from + length; i++) {
    const c = bytes[i]!
    if (!hex(c)) return false
    if (c !== 0x30) nonZero = true
  }
  return nonZero
}

const dash = 0x2d
const emptyContext: Context.Context<never> = Context.empty()

/**
 * The remote span of a `traceparent` value (`00-<32 hex trace id>-<16 hex
 * span id>-<2 hex flags>`; a later version may append `-` and more), or
 * `undefined` when it is malformed.
 */
export const parseTraceparent = (value: Buffer): Tracer.ExternalSpan | undefined => {
  if (value.length < 55) return undefined
  if (!hex(value[0]!) || !hex(value[1]!) || value[2] !== dash || value[35] !== dash || value[52] !== dash) return undefined
  const version = value.toString("latin1", 0, 2)
  if (version === "ff") return undefined
  if (version === "00" ? value.length !== 55 : value.length > 55 && value[55] !== dash) return undefined
  if (!hexId(value, 3, 32) || !hexId(value, 36, 16) || !hex(value[53]!) || !hex(value[54]!)) return undefined
  const flags = Number.parseInt(value.toString("latin1", 53, 55), 16)
  return {
    _tag: "ExternalSpan",
    traceId: value.toString("latin1", 3, 35),
    spanId: value.toString("latin1", 36, 52),
    sampled: (flags & 1) === 1,
    context: emptyContext
  }
}


/** The remote parent a record's headers carry (`undefined`: none, or malformed). */
export const remoteParent = (record: FetchedRecord): Tracer.ExternalSpan | undefined => {
  const value = record.rawHeaders[traceparentHeader]
  // Absent, empty, or repeated (an array): no parent.
  return Buffer.isBuffer(value) ? parseTraceparent(value) : undefined
}

const idPattern = (length: number) => new RegExp(`^[0-9a-f]{${length}}$`)
const traceIdPattern = idPattern(32)
const spanIdPattern = idPattern(16)

/** The trace context an output of a transform carries: its span's `traceparent`, the input's `tracestate`. */
export interface TraceHeaders {
  readonly traceparent: string
  /** The input's `traceparent` (an output with exactly this value copied it: replaced). */
  readonly inputTraceparent: Buffer | undefined
  readonly tracestate: Buffer | undefined
}

/** The headers for outputs of a transform running in `span`; `undefined` when its ids are not W3C ones. */
export const traceHeaders = (span: Tracer.Span, record: FetchedRecord): TraceHeaders | undefined => {
  if (!traceIdPattern.test(span.traceId) || !spanIdPattern.test(span.spanId)) return undefined
  const input = record.rawHeaders[traceparentHeader]
  const inputTraceparent = Buffer.isBuffer(input) ? input : undefined
  const state = record.rawHeaders[tracestateHeader]
  return {
    traceparent: `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`,
    inputTraceparent,
    // A tracestate continues only the trace its traceparent started.
    tracestate: inputTraceparent !== undefined && Buffer.isBuffer(state) && state.length > 0 ? state : undefined
  }
}

/** True when an output's header value is absent, or the input's value copied (as `rawHeaders` copies it). */
const replaceable = (value: Topic.HeaderValue | undefined, input: Buffer | undefined): boolean =>
  value === undefined ||
  (input !== undefined && (typeof value === "string" ? input.equals(Buffer.from(value)) : Buffer.isBuffer(value) && input.equals(value)))

/**
 * `encoded` with the trace context: `traceparent` unless the transform set
 * one of its own, `tracestate` from the input unless it set one of its own.
 */
export const withTraceHeaders = (encoded: Topic.EncodedRecord, trace: TraceHeaders): Topic.EncodedRecord => {
  const headers = encoded.headers
  if (headers === undefined) {
    return {
      ...encoded,
      headers: trace.tracestate === undefined
        ? { [traceparentHeader]: trace.traceparent }
        : { [traceparentHeader]: trace.traceparent, [tracestateHeader]: trace.tracestate }
    }
  }
  if (!replaceable(headers[traceparentHeader], trace.inputTraceparent)) return encoded
  const copy: Record<string, Topic.HeaderValue> = { ...headers, [traceparentHeader]: trace.traceparent }
  // The input's tracestate, unless the output has one (its own, or the input's copied).
  if (trace.tracestate !== undefined && headers[tracestateHeader] === undefined) copy[tracestateHeader] = trace.tracestate
  return { ...encoded, headers: copy }
}
