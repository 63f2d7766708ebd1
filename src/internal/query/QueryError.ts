/**
 * Why a query has no answer here, as values: each carries its HTTP status
 * and the JSON body a caller reads (`error` names the case), with a message
 * naming the problem and the fix. Never a wrong or partial value: a key this
 * instance does not own is `NotHere`, a partition not ready is `NotReady`.
 *
 * @internal
 */
import { Data } from "effect"

/** A parameter, a key or the path is malformed (400). */
export class BadRequest extends Data.TaggedError("BadRequest")<{
  readonly reason: "MalformedKey" | "MalformedPath" | "InvalidParameter"
  readonly message: string
}> {}

/** A page larger than the largest one served (400): ask for less, page on with `after`. */
export class RangeTooLarge extends Data.TaggedError("RangeTooLarge")<{
  readonly limit: number
  readonly maxLimit: number
}> {
  override get message(): string {
    return `limit ${this.limit} is above the largest page, ${this.maxLimit}: ask for at most ${this.maxLimit} entries ` +
      "and page on with after= (the answer's next)"
  }
}

/** The transformer or store the path names is not one of this application's (404). */
export class Unknown extends Data.TaggedError("Unknown")<{
  readonly what: "transformer" | "store"
  /** For a store: the kind the query reads. */
  readonly kind?: "KeyValueStore" | "WindowStore" | "SessionStore" | undefined
  readonly name: string
  /** What can be asked instead. */
  readonly known: ReadonlyArray<string>
  readonly detail?: string | undefined
}> {
  override get message(): string {
    const known = this.known.length === 0 ? "none" : this.known.map((name) => JSON.stringify(name)).join(", ")
    return `no queryable ${this.what} ${JSON.stringify(this.name)}${this.detail === undefined ? "" : ` (${this.detail})`}: ` +
      `the ${this.what === "transformer" ? "stateful transformers" : `${this.kind ?? "KeyValueStore"}s`} here are ${known}`
  }
}

/** The key's partition is not an active task of this instance (404): ask the instance that owns it. */
export class NotHere extends Data.TaggedError("NotHere")<{
  readonly partition: number
  readonly partitions: number
  /** The query endpoint (`host:port`) of the instance running the partition, as of this instance's last join. */
  readonly owner: string | undefined
  /** The endpoints of the instances keeping a standby copy of it. */
  readonly standbys: ReadonlyArray<string>
}> {
  override get message(): string {
    return `partition ${this.partition} (of ${this.partitions}) is not an active task of this instance: ` +
      (this.owner === undefined
        ? "its owner is not known here (the group is rebalancing, or it has no query endpoint): retry, or ask another instance"
        : `ask ${this.owner}, which runs it`)
  }
}

/** The key's partition is assigned here but not queryable yet (503): retry after `retryAfterMillis`. */
export class NotReady extends Data.TaggedError("NotReady")<{
  readonly partition: number
  readonly reason: "restoring" | "stopped" | "unavailable" | "unreachable"
  readonly retryAfterMillis: number
}> {
  override get message(): string {
    return this.reason === "restoring"
      ? `partition ${this.partition} is restoring its state here: retry in ${this.retryAfterMillis} ms`
      : this.reason === "stopped"
      ? `partition ${this.partition} is stopped here by a failure (see /health/ready): its state is answered again ` +
        "once the partition restarts or moves"
      : this.reason === "unreachable"
      ? `partition ${this.partition}'s owner did not answer (it may have stopped: the group moves its partitions): ` +
        `retry in ${this.retryAfterMillis} ms`
      : `partition ${this.partition}'s store could not be read (the task is moving or stopped): retry in ` +
        `${this.retryAfterMillis} ms, or ask the instance that owns it`
  }
}

/** The store did not reflect a position bound's records within its timeout (503, KIP-796's NOT_UP_TO_BOUND). */
export class NotUpToBound extends Data.TaggedError("NotUpToBound")<{
  readonly partition: number
  readonly bound: ReadonlyArray<{ readonly topic: string; readonly offset: number }>
  /** The next offset of each input the store is past, when the wait ended. */
  readonly position: ReadonlyMap<string, number>
  readonly timeoutMillis: number
}> {
  override get message(): string {
    const at = [...this.position].map(([topic, offset]) => `${topic}:${offset}`).join(",")
    return `partition ${this.partition}'s store did not reflect ${this.bound.map((b) => `${b.topic}:${b.offset}`).join(",")} ` +
      `within ${this.timeoutMillis} ms (it is past ${at === "" ? "nothing yet" : at}, next offsets): the records may not be ` +
      "processed yet (a slow or stopped task), or are not on this partition"
  }
}

export type QueryError = BadRequest | RangeTooLarge | Unknown | NotHere | NotReady | NotUpToBound

/** The HTTP status of `error`. */
export const status = (error: QueryError): number => {
  switch (error._tag) {
    case "BadRequest":
    case "RangeTooLarge":
      return 400
    case "Unknown":
    case "NotHere":
      return 404
    case "NotReady":
    case "NotUpToBound":
      return 503
  }
}

/** The JSON body of `error`: `error` names the case, `message` says what to do. */
export const body = (error: QueryError): Record<string, unknown> => {
  switch (error._tag) {
    case "BadRequest":
      return { error: error.reason, message: error.message }
    case "RangeTooLarge":
      return { error: "RangeTooLarge", limit: error.limit, maxLimit: error.maxLimit, message: error.message }
    case "Unknown":
      return {
        error: error.what === "transformer" ? "UnknownTransformer" : "UnknownStore",
        name: error.name,
        known: error.known,
        message: error.message
      }
    case "NotHere":
      return {
        error: "NotHere",
        partition: error.partition,
        partitions: error.partitions,
        owner: error.owner ?? null,
        standbys: error.standbys,
        message: error.message
      }
    case "NotUpToBound":
      return {
        error: "NotUpToBound",
        partition: error.partition,
        bound: error.bound,
        position: Object.fromEntries(error.position),
        timeoutMillis: error.timeoutMillis,
        message: error.message
      }
    case "NotReady":
      return {
        error: "NotReady",
        partition: error.partition,
        reason: error.reason,
        retryAfterMillis: error.retryAfterMillis,
        message: error.message
      }
  }
}
