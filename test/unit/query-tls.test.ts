/**
 * The query endpoint over TLS (`queryTlsCertFile`, `queryTlsKeyFile`,
 * `queryTlsCaFile`): a certificate made for 127.0.0.1 by a throwaway CA,
 * two endpoints that serve HTTPS and forward to each other over HTTPS
 * trusting that CA, the typed client asking them over HTTPS, plain HTTP
 * refused; the key read into a `Redacted` and in no log line; half a
 * setting is a `ConfigurationError` saying what to set.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger, Option, Redacted, Schema } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as Https from "node:https"
import * as path from "node:path"
import { KeyValueStore, QueryClient } from "../../src/index.ts"
import * as CommitReceipt from "../../src/internal/runtime/CommitReceipt.ts"
import * as MemoryStore from "../../src/internal/stores/memoryStore.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import type * as Queries from "../../src/internal/query/Queries.ts"
import * as QueryTls from "../../src/internal/query/queryTls.ts"
import * as QueryServer from "../../src/internal/query/queryServer.ts"
import type * as QueryRoutes from "../../src/internal/query/QueryRoutes.ts"
import { namespace } from "../../src/internal/stores/keys.ts"
import { tempDir } from "../helpers/tempDir.ts"

/** A CA and a certificate for 127.0.0.1 it signed, as PEM files in `dir`. */
const certificates = (dir: string) => {
  const file = (name: string) => path.join(dir, name)
  const openssl = (...args: ReadonlyArray<string>) => execFileSync("openssl", args, { stdio: "pipe" })
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=skein-test-ca", "-keyout", file("ca.key"), "-out", file("ca.pem"))
  openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", file("server.key"), "-out", file("server.csr"))
  fs.writeFileSync(file("ext.cnf"), "subjectAltName=IP:127.0.0.1\n")
  openssl("x509", "-req", "-in", file("server.csr"), "-CA", file("ca.pem"), "-CAkey", file("ca.key"), "-CAcreateserial", "-days", "1", "-extfile", file("ext.cnf"), "-out", file("server.pem"))
  return { ca: file("ca.pem"), cert: file("server.pem"), key: file("server.key") }
}

const partitions = 2
const keyOn = (partition: number): string => {
  for (let i = 0; ; i++) if (partitionOf(`k${i}`, partitions) === partition) return `k${i}`
}
const Totals = KeyValueStore.make({ name: "totals", key: Schema.String, value: Schema.Number })

describe("the query endpoint over TLS", () => {
  it.scopedLive("serves HTTPS, forwards over HTTPS trusting the CA, and the client asks it; plain HTTP gets no answer", () =>
    Effect.gen(function*() {
      const files = certificates(yield* tempDir("skein-query-tls-"))
      const tls = yield* QueryTls.read({ queryTlsCertFile: files.cert, queryTlsKeyFile: files.key, queryTlsCaFile: files.ca })
      if (tls === undefined) return assert.fail("no TLS read")
      assert.notInclude(String(tls.key), "PRIVATE KEY")
      const logged: Array<string> = []
      const logger = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => {
        logged.push(String(message))
      }))
      let endpoints = { a: "", b: "" }
      const routes = (): QueryRoutes.QueryRoutes => ({ active: [endpoints.a, endpoints.b], standbys: [[], []] })
      const sourceOf = (own: number, self: () => string) =>
        Effect.gen(function*() {
          const store = MemoryStore.make(`memory-${own}`, own)
          yield* store.write(CommitReceipt.issue(own, []), [{ key: `${namespace("totals")}${keyOn(own)}`, value: String(own + 10) }])
          const source: Queries.Source = {
            transformer: "count",
            stateful: true,
            keyValueStores: ["totals"],
            otherStores: new Map(),
            partitions,
            partition: (p) => p === own ? store : "absent",
            assigned: () => [own],
            routes,
            self,
            inputs: ["in"],
            position: () => new Map(),
            nextPositionChange: () => Effect.never,
            standby: () => undefined
          }
          return source
        })
      const options = { port: 0, host: "127.0.0.1", tls, token: Redacted.make("t0ken") }
      const a = yield* QueryServer.serve(yield* sourceOf(0, () => endpoints.a), options).pipe(Effect.provide(logger))
      const b = yield* QueryServer.serve(yield* sourceOf(1, () => endpoints.b), options).pipe(Effect.provide(logger))
      endpoints = { a: `127.0.0.1:${a.port}`, b: `127.0.0.1:${b.port}` }
      const trusting = NodeHttpClient.layerWithoutAgent.pipe(Layer.provide(NodeHttpClient.makeAgentLayer({ ca: fs.readFileSync(files.ca, "utf8") })))
      // The typed client over HTTPS, given A: B's key followed to B.
      const client = yield* QueryClient.make({ endpoints: [endpoints.a], token: Redacted.make("t0ken"), scheme: "https" })
        .pipe(Effect.provide(trusting))
      assert.deepStrictEqual(yield* client.get(Totals, keyOn(1)), Option.some(11))
      assert.deepStrictEqual(yield* client.get(Totals, keyOn(0)), Option.some(10))
      // Asked without x-skein-forward: no, A forwards B's key to B over HTTPS.
      const forwarded = yield* Effect.promise(() =>
        new Promise<{ status: number; body: string; servedBy: string | undefined }>((resolve, reject) => {
          const request = Https.get({
            host: "127.0.0.1",
            port: a.port,
            path: `/stores/totals/keys/${keyOn(1)}`,
            ca: fs.readFileSync(files.ca, "utf8"),
            headers: { authorization: "Bearer t0ken" }
          }, (response) => {
            let body = ""
            response.on("data", (chunk) => body += chunk)
            response.on("end", () => resolve({ status: response.statusCode ?? 0, body, servedBy: String(response.headers["x-skein-served-by"]) }))
          })
          request.on("error", reject)
        })
      )
      assert.deepStrictEqual([forwarded.status, JSON.parse(forwarded.body).value, forwarded.servedBy], [200, 11, endpoints.b])
      // Plain HTTP to the HTTPS port: no answer of the endpoint's.
      const plain = yield* Effect.promise(() => fetch(`http://127.0.0.1:${a.port}/metadata`).then((r) => r.status, () => "refused"))
      assert.notStrictEqual(plain, 200)
      assert.isTrue(logged.some((line) => line.includes(`https://127.0.0.1:${a.port}`)), logged.join("\n"))
      const key = fs.readFileSync(files.key, "utf8").split("\n")[1] ?? "?"
      assert.isFalse(logged.some((line) => line.includes(key)), "the key in a log line")
    }))

  it.effect("half a setting, or a file that cannot be read, is a ConfigurationError naming the setting", () =>
    Effect.gen(function*() {
      assert.isUndefined(yield* QueryTls.read({}))
      const half = yield* Effect.flip(QueryTls.read({ queryTlsCertFile: "/x.pem" }))
      assert.include(half.message, "SKEIN_QUERY_TLS_KEY_FILE")
      const caOnly = yield* Effect.flip(QueryTls.read({ queryTlsCaFile: "/ca.pem" }))
      assert.include(caOnly.message, "SKEIN_QUERY_TLS_CA_FILE")
      const missing = yield* Effect.flip(QueryTls.read({ queryTlsCertFile: "/nonexistent/cert.pem", queryTlsKeyFile: "/nonexistent/key.pem" }))
      assert.include(missing.message, "SKEIN_QUERY_TLS_CERT_FILE is /nonexistent/cert.pem, which cannot be read (ENOENT)")
    }))
})
