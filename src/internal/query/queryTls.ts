/**
 * TLS of the query endpoint (`queryTlsCertFile`, `queryTlsKeyFile`,
 * `queryTlsCaFile`): the PEM files read at startup, the private key held as
 * a `Redacted` (never logged, never in an error), the CA the endpoint trusts
 * when it forwards a query to another instance (unset: the system's).
 *
 * @internal
 */
import { Effect, Redacted } from "effect"
import * as fs from "node:fs/promises"
import type { SkeinConfig } from "../../SkeinConfig.ts"
import { ConfigurationError } from "../../SkeinError.ts"

/** The endpoint's certificate and key (PEM), and the CA its forwards trust. */
export interface QueryTls {
  readonly cert: string
  readonly key: Redacted.Redacted<string>
  readonly ca: string | undefined
}

const readPem = (file: string, setting: string): Effect.Effect<string, ConfigurationError> =>
  Effect.tryPromise({
    try: () => fs.readFile(file, "utf8"),
    catch: (error) =>
      new ConfigurationError({
        problem: `${setting} is ${file}, which cannot be read (${
          typeof error === "object" && error !== null && "code" in error ? String(error.code) : "unreadable"
        })`,
        fix: `Point ${setting} at a readable PEM file`
      })
  })

/** The endpoint's TLS from the settings; `undefined` without a certificate (plain HTTP). */
export const read = (
  config: Pick<SkeinConfig, "queryTlsCertFile" | "queryTlsKeyFile" | "queryTlsCaFile">
): Effect.Effect<QueryTls | undefined, ConfigurationError> =>
  Effect.gen(function*() {
    const { queryTlsCaFile, queryTlsCertFile, queryTlsKeyFile } = config
    if ((queryTlsCertFile === undefined) !== (queryTlsKeyFile === undefined)) {
      return yield* new ConfigurationError({
        problem: "Only one of queryTlsCertFile (SKEIN_QUERY_TLS_CERT_FILE) and queryTlsKeyFile (SKEIN_QUERY_TLS_KEY_FILE) is set",
        fix: "TLS for the query endpoint needs its certificate and its private key: set both, or neither"
      })
    }
    if (queryTlsCertFile === undefined || queryTlsKeyFile === undefined) {
      return queryTlsCaFile === undefined ? undefined : yield* new ConfigurationError({
        problem: "queryTlsCaFile (SKEIN_QUERY_TLS_CA_FILE) is set without the endpoint's certificate and key",
        fix: "Set SKEIN_QUERY_TLS_CERT_FILE and SKEIN_QUERY_TLS_KEY_FILE too, or unset SKEIN_QUERY_TLS_CA_FILE"
      })
    }
    return {
      cert: yield* readPem(queryTlsCertFile, "SKEIN_QUERY_TLS_CERT_FILE"),
      key: Redacted.make(yield* readPem(queryTlsKeyFile, "SKEIN_QUERY_TLS_KEY_FILE")),
      ca: queryTlsCaFile === undefined ? undefined : yield* readPem(queryTlsCaFile, "SKEIN_QUERY_TLS_CA_FILE")
    }
  })
