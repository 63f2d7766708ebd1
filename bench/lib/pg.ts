/**
 * The plain `pg` package (node-postgres, the driver `@effect/sql-pg` is built on), for the
 * Postgres job's harness and its at-least-once loop (bench/apps/kafkajs-postgres.ts).
 *
 * The project installs `pg` as `@effect/sql-pg`'s dependency, without its type declarations
 * (`@types/pg`): this module loads it with `require` and states the few members the benchmark
 * uses (a `Pool`, its `query` and `end`), as node-postgres documents them.
 */
import { createRequire } from "node:module"

/** A query's answer: its rows as the driver returns them (BIGINT and COUNT as text). */
export interface QueryResult {
  readonly rows: ReadonlyArray<Readonly<Record<string, unknown>>>
  readonly rowCount: number | null
}

/** node-postgres's connection pool (`new pg.Pool({ connectionString, max })`). */
export interface Pool {
  /** One statement on a pooled connection (autocommit), `$1, $2, ...` bound to `values`. */
  readonly query: (text: string, values?: ReadonlyArray<unknown>) => Promise<QueryResult>
  /** Closes every connection of the pool. */
  readonly end: () => Promise<void>
}

interface PgModule {
  readonly Pool: new (config: { readonly connectionString: string; readonly max?: number }) => Pool
}

const pg: PgModule = createRequire(import.meta.url)("pg")

/** A pool of at most `max` connections to `url` (node-postgres's default is 10). */
export const makePool = (url: string, max = 10): Pool => new pg.Pool({ connectionString: url, max })

/** The first row's column as a number (`count(*)` and BIGINT come back as text). */
export const numberOf = (result: QueryResult, column: string): number => Number(result.rows[0]?.[column] ?? Number.NaN)
