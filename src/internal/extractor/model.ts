/**
 * The shapes of an extractor that the internal modules need: `Extractor`,
 * `Page` and `ExtractorError`. The public `Extractor` module re-exports them
 * (with their documentation), so no internal module imports it.
 *
 * @internal
 */
import type { Duration, Effect, Option, Schedule } from "effect"
import type { ConfigurationError, EncodeError, KafkaError, SecurityError } from "../../SkeinError.ts"
import type * as Topic from "../../Topic.ts"
import type { BadCursor, InvalidTokens, ReadTimeout } from "./errors.ts"

/** What one read of the source returns (see `Extractor.Page`). */
export interface Page<C> {
  readonly _tag: "Page" | "Drained"
  readonly emit: ReadonlyArray<Topic.OutputRecord>
  readonly next: C
}

/** A declared extractor (see `Extractor.Extractor`). */
export interface Extractor<in out Token extends string, in out C, in out E, out R> {
  readonly name: string
  readonly tokens: ReadonlyArray<Token>
  /** The cursor codec: the Schema's encoded form, as JSON text. */
  readonly cursor: Topic.Codec<C>
  /** The cursor of a token that has never committed one. */
  readonly initial: C
  readonly read: (token: Token, cursor: C) => Effect.Effect<Page<C>, E, R>
  /** When to read again after a drained page; the token stops reading when it ends. */
  readonly poll: Schedule.Schedule<unknown, unknown>
  readonly rateLimit: Option.Option<{ readonly pages: number; readonly per: Duration.Duration }>
  /** How long a read may take before it fails with `ReadTimeout`. */
  readonly timeout: Option.Option<Duration.Duration>
  /** Retries of a failed read; without it a failed read ends the run. */
  readonly retry: Option.Option<Schedule.Schedule<unknown, E | ReadTimeout>>
}

/** Every fatal error a run can end with, besides the read's own errors (see `Extractor.ExtractorError`). */
export type ExtractorError =
  | KafkaError
  | EncodeError
  | BadCursor
  | InvalidTokens
  | ReadTimeout
  | ConfigurationError
  | SecurityError
