/**
 * The tracing example (examples/tracing.ts) against an OTLP/HTTP collector of the test's own:
 * configured only by OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_SERVICE_NAME, it exports Skein's spans,
 * and the transform span of the record that carried a traceparent continues that trace.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import * as http from "node:http"
import * as path from "node:path"
import { brokers } from "../helpers/kafka.ts"

const root = path.join(import.meta.dirname, "..", "..")
const upstreamTraceId = "4bf92f3577b34da6a3ce929d0e0e4736"
const upstreamSpanId = "00f067aa0ba902b7"

interface ExportedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
}

/** An OTLP/HTTP JSON trace receiver: every span posted to /v1/traces, with the service names. */
const collector = Effect.acquireRelease(
  Effect.async<{ readonly port: number; readonly spans: Array<ExportedSpan>; readonly services: Set<string>; readonly server: http.Server }>((resume) => {
    const spans: Array<ExportedSpan> = []
    const services = new Set<string>()
    const server = http.createServer((request, response) => {
      let body = ""
      request.on("data", (chunk) => (body += String(chunk)))
      request.on("end", () => {
        if (request.url === "/v1/traces") {
          const payload = JSON.parse(body) as {
            resourceSpans: ReadonlyArray<{
              resource: { attributes: ReadonlyArray<{ key: string; value: { stringValue?: string } }> }
              scopeSpans: ReadonlyArray<{ spans: ReadonlyArray<ExportedSpan> }>
            }>
          }
          for (const resourceSpans of payload.resourceSpans) {
            for (const attribute of resourceSpans.resource.attributes) {
              if (attribute.key === "service.name" && attribute.value.stringValue !== undefined) services.add(attribute.value.stringValue)
            }
            for (const scope of resourceSpans.scopeSpans) spans.push(...scope.spans)
          }
        }
        response.writeHead(200, { "content-type": "application/json" }).end("{}")
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resume(Effect.succeed({ port: typeof address === "object" && address !== null ? address.port : 0, spans, services, server }))
    })
  }),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

describe("tracing example", () => {
  it.scopedLive("exports the spans to the OTLP endpoint of OTEL_EXPORTER_OTLP_ENDPOINT; the input's trace continues", () =>
    Effect.gen(function*() {
      const otlp = yield* collector
      const stdout = yield* Effect.async<string, Error>((resume) => {
        execFile(process.execPath, ["--import", "tsx", "examples/tracing.ts"], {
          cwd: root,
          env: {
            ...process.env,
            KAFKA_BROKERS: brokers().join(","),
            OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${otlp.port}`,
            OTEL_SERVICE_NAME: "otlp-example-test"
          },
          timeout: 120_000
        }, (error, out, err) => {
          if (error) resume(Effect.fail(new Error(`the example failed: ${error.message}\n${out}\n${err}`)))
          else resume(Effect.succeed(out))
        })
      })
      assert.deepStrictEqual([...otlp.services], ["otlp-example-test"])
      const names = new Set(otlp.spans.map((s) => s.name))
      for (const name of ["skein.poll", "skein.batch", "skein.transform", "skein.commit", "skein.task.start", "skein.restore"]) {
        assert.isTrue(names.has(name), `${name} exported (got ${[...names].join(", ")})`)
      }
      const continued = otlp.spans.filter((s) => s.name === "skein.transform" && s.traceId === upstreamTraceId)
      assert.strictEqual(continued.length, 1, "the record with a traceparent: its transform span is in the upstream trace")
      assert.strictEqual(continued[0]!.parentSpanId, upstreamSpanId)
      // Its output carries the transform span's context onward.
      assert.include(stdout, `fox=1 traceparent 00-${upstreamTraceId}-${continued[0]!.spanId}-01`)
    }), 150_000)
})
