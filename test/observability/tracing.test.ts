import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema, Tracer } from "effect"
import type { Exit } from "effect"
import { randomBytes } from "node:crypto"
import { Topic, Transformer } from "../../src/index.ts"
import { caughtUp, createTopics, produceRaw, readCommitted, startInstance, unique } from "../helpers/kafka.ts"

/** A span as an in-memory exporter keeps it. */
class RecordedSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly spanId = randomBytes(8).toString("hex")
  readonly traceId: string
  readonly sampled: boolean
  readonly attributes = new Map<string, unknown>()
  readonly links: Array<Tracer.SpanLink>
  status: Tracer.SpanStatus
  constructor(
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Parameters<Tracer.Tracer["span"]>[2],
    links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind
  ) {
    this.traceId = Option.isSome(parent) ? parent.value.traceId : randomBytes(16).toString("hex")
    this.sampled = Option.isSome(parent) ? parent.value.sampled : true
    this.links = [...links]
    this.status = { _tag: "Started", startTime }
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
  }
  attribute(key: string, value: unknown): void {
    this.attributes.set(key, value)
  }
  event(): void {}
  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    this.links.push(...links)
  }
}

const inMemoryTracer = () => {
  const spans: Array<RecordedSpan> = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const span = new RecordedSpan(name, parent, context, links, startTime, kind)
      spans.push(span)
      return span
    },
    context: (f) => f()
  })
  return { spans, tracer }
}

const parentOf = (span: Tracer.Span): Tracer.AnySpan | undefined => Option.getOrUndefined(span.parent)

describe("tracing", () => {
  it.scopedLive("a span tree per batch; a record's transform span continues its input's trace; outputs carry it on", () =>
    Effect.gen(function*() {
      const input = unique("trace-in")
      const output = unique("trace-out")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const ownTraceparent = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
      // A stateful transformer: its tasks restore (a `skein.restore` span under each task start).
      const copy = Transformer.make({
        name: "trace-copy",
        inputs: [In],
        state: Schema.Number,
        transform: (record, count) => {
          const next = Option.getOrElse(count, () => 0) + 1
          const headers = record.key === "own"
            ? { traceparent: ownTraceparent } // set by the transform: kept
            : record.key === "copied"
            ? record.rawHeaders // the input's headers copied: its traceparent is replaced
            : undefined
          return Effect.succeed({ emit: [Topic.record(Out, record.key, record.value, headers)], state: Transformer.set(next) })
        }
      })

      const upstreamTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
      const upstreamSpan = "00f067aa0ba902b7"
      const unsampledTrace = "5bf92f3577b34da6a3ce929d0e0e4737"
      yield* produceRaw(input, [
        { key: "traced", value: "a", headers: { traceparent: `00-${upstreamTrace}-${upstreamSpan}-01`, tracestate: "vendor=opaque" } },
        { key: "plain", value: "b" },
        { key: "malformed", value: "c", headers: { traceparent: "00-not-a-trace-context" } },
        { key: "zeros", value: "d", headers: { traceparent: `00-${"0".repeat(32)}-${upstreamSpan}-01` } },
        { key: "unsampled", value: "e", headers: { traceparent: `00-${unsampledTrace}-${upstreamSpan}-00` } },
        { key: "own", value: "f", headers: { traceparent: `00-${upstreamTrace}-${upstreamSpan}-01` } },
        { key: "copied", value: "g", headers: { traceparent: `00-${upstreamTrace}-${upstreamSpan}-01`, other: "x" } }
      ])

      const { spans, tracer } = inMemoryTracer()
      const applicationId = unique("trace-app")
      const instance = yield* startInstance(copy, { applicationId }, Layer.setTracer(tracer))
      yield* caughtUp(applicationId, input).pipe(
        Effect.tapError(() => Effect.flatMap(instance.exit, (exit) => Effect.logError("run ended", exit)))
      )
      assert.isTrue(Option.isNone(yield* instance.exit), "the run goes on: a malformed traceparent is no poison record")
      const outputs = new Map((yield* readCommitted(output)).map((r) => [r.key, r]))
      assert.strictEqual(outputs.size, 7)

      const named = (name: string) => spans.filter((s) => s.name === name)
      const transforms = new Map(named("skein.transform").map((s) => [s.attributes.get("messaging.kafka.offset"), s]))
      const transformOf = (offset: number) => {
        const span = transforms.get(offset)
        assert.ok(span !== undefined, `the transform span of offset ${offset}`)
        return span
      }
      const byId = new Map(spans.map((s) => [s.spanId, s]))

      // Task start and restore: a restore span under the task's start span.
      const [start] = named("skein.task.start")
      assert.ok(start !== undefined, "a task start span")
      assert.strictEqual(start.attributes.get("skein.application_id"), applicationId)
      assert.strictEqual(start.attributes.get("skein.transformer"), "trace-copy")
      assert.strictEqual(start.attributes.get("messaging.destination.partition.id"), "0")
      assert.strictEqual(start.attributes.get("skein.restore.mode"), "full")
      assert.strictEqual(start.status._tag, "Ended")
      const [restore] = named("skein.restore")
      assert.ok(restore !== undefined, "a restore span")
      assert.strictEqual(parentOf(restore)?.spanId, start.spanId, "restore: a child of the task start")
      assert.strictEqual(restore.attributes.get("skein.changelog"), Transformer.changelogTopic(applicationId, copy))
      assert.strictEqual(restore.attributes.get("skein.restore.mode"), "full")
      assert.strictEqual(restore.attributes.get("skein.restore.records"), 0)

      // Poll -> batch -> transform (no remote parent) and commit.
      const plain = transformOf(1)
      const batch = parentOf(plain)
      assert.ok(batch !== undefined && batch._tag === "Span" && batch.name === "skein.batch", "plain: a child of its batch span")
      const batchSpan = byId.get(batch.spanId)!
      assert.strictEqual(batchSpan.attributes.get("skein.application_id"), applicationId)
      assert.strictEqual(batchSpan.attributes.get("skein.transformer"), "trace-copy")
      assert.strictEqual(batchSpan.attributes.get("messaging.destination.partition.id"), "0")
      assert.isAbove(batchSpan.attributes.get("messaging.batch.message_count") as number, 0)
      assert.strictEqual(batchSpan.attributes.get("skein.outcome"), "Committed")
      assert.strictEqual(batchSpan.kind, "consumer")
      const poll = parentOf(batchSpan)
      assert.ok(poll !== undefined && poll._tag === "Span" && poll.name === "skein.poll", "batch: a child of its poll span")
      assert.strictEqual(byId.get(poll.spanId)?.attributes.get("skein.application_id"), applicationId)
      const commits = named("skein.commit").filter((c) => parentOf(c)?.spanId === batchSpan.spanId)
      assert.strictEqual(commits.length, 1, "one commit span per batch, a child of it")
      assert.strictEqual(commits[0]!.attributes.get("skein.processing_guarantee"), "exactly-once")
      assert.strictEqual(commits[0]!.attributes.get("skein.commit.records"), batchSpan.attributes.get("skein.processed"))
      assert.strictEqual(commits[0]!.status._tag === "Ended" && commits[0]!.status.exit._tag, "Success")
      assert.strictEqual(plain.attributes.get("messaging.destination.name"), input)
      assert.strictEqual(plain.attributes.get("messaging.destination.partition.id"), "0")
      assert.strictEqual(
        outputs.get("plain")?.headers["traceparent"],
        `00-${plain.traceId}-${plain.spanId}-01`,
        "an output carries its transform span's context"
      )
      assert.strictEqual(plain.traceId, batchSpan.traceId)

      // A record with a traceparent: its transform span continues that trace, linked to the batch.
      const traced = transformOf(0)
      const remote = parentOf(traced)
      assert.ok(remote !== undefined && remote._tag === "ExternalSpan")
      assert.deepStrictEqual([remote.traceId, remote.spanId, remote.sampled], [upstreamTrace, upstreamSpan, true])
      assert.strictEqual(traced.traceId, upstreamTrace)
      assert.strictEqual(traced.kind, "consumer")
      assert.strictEqual(traced.links.length, 1)
      const linked = byId.get(traced.links[0]!.span.spanId)
      assert.strictEqual(linked?.name, "skein.batch", "linked to its batch span")
      assert.strictEqual(byId.get(parentOf(linked!)?.spanId ?? "")?.name, "skein.poll", "the linked batch is a poll's")
      const out = outputs.get("traced")
      assert.strictEqual(out?.headers["traceparent"], `00-${upstreamTrace}-${traced.spanId}-01`)
      assert.strictEqual(out?.headers["tracestate"], "vendor=opaque", "the input's tracestate goes on")

      // Malformed or all-zero trace ids are ignored: a child of the batch, as without one.
      for (const offset of [2, 3]) {
        const span = transformOf(offset)
        assert.strictEqual(parentOf(span)?._tag, "Span", `offset ${offset}: the batch span is its parent`)
        assert.strictEqual((parentOf(span) as Tracer.Span).name, "skein.batch")
        assert.deepStrictEqual(span.links, [])
        const key = offset === 2 ? "malformed" : "zeros"
        assert.strictEqual(outputs.get(key)?.headers["traceparent"], `00-${span.traceId}-${span.spanId}-01`)
      }

      // An unsampled trace stays unsampled downstream.
      const unsampled = transformOf(4)
      assert.strictEqual(unsampled.traceId, unsampledTrace)
      assert.strictEqual(outputs.get("unsampled")?.headers["traceparent"], `00-${unsampledTrace}-${unsampled.spanId}-00`)

      // The transform's own traceparent is kept; a copied input one is replaced.
      assert.strictEqual(outputs.get("own")?.headers["traceparent"], ownTraceparent)
      const copied = transformOf(6)
      assert.strictEqual(outputs.get("copied")?.headers["traceparent"], `00-${upstreamTrace}-${copied.spanId}-01`)
      assert.strictEqual(outputs.get("copied")?.headers["other"], "x")

      for (const span of named("skein.transform")) assert.strictEqual(span.status._tag, "Ended")
    }), 120_000)

  it.scopedLive("without a tracer installed, outputs are as the transform made them", () =>
    Effect.gen(function*() {
      const input = unique("notrace-in")
      const output = unique("notrace-out")
      yield* createTopics([{ name: input, partitions: 1 }, { name: output, partitions: 1 }])
      const In = Topic.make({ name: input, key: Schema.String, value: Schema.String })
      const Out = Topic.make({ name: output, key: Schema.String, value: Schema.String })
      const copy = Transformer.stateless({
        name: "notrace-copy",
        inputs: [In],
        transform: (record) => Effect.succeed({ emit: [Topic.record(Out, record.key, record.value)] })
      })
      yield* produceRaw(input, [
        { key: "traced", value: "a", headers: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" } },
        { key: "plain", value: "b" }
      ])
      const applicationId = unique("notrace-app")
      yield* startInstance(copy, { applicationId })
      yield* caughtUp(applicationId, input)
      const out = yield* readCommitted(output)
      assert.deepStrictEqual(out.map((r) => [r.key, r.headers]), [["traced", {}], ["plain", {}]])
    }), 120_000)
})

