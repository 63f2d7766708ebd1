/**
 * The errors only an extractor can fail with. Re-exported by `Extractor.ts`.
 *
 * @internal
 */
import { Data, Duration } from "effect"

/**
 * The committed cursor of a token cannot be used: it does not decode with the
 * extractor's cursor Schema, it belongs to another token (the token list was
 * reordered), or it is a tombstone. Fatal: the extractor never guesses a
 * cursor, since restarting from the initial cursor would emit every page
 * again.
 *
 * @since 0.1.0
 * @category errors
 */
export class BadCursor extends Data.TaggedError("BadCursor")<{
  readonly reason: "Undecodable" | "WrongToken" | "Tombstone"
  readonly extractor: string
  readonly token: string
  readonly topic: string
  readonly partition: number
  readonly offset: number
  readonly cause: unknown
}> {
  override get message(): string {
    const where = `${this.topic}/${this.partition}@${this.offset}`
    switch (this.reason) {
      case "Undecodable": {
        const detail = this.cause instanceof Error ? this.cause.message : String(this.cause)
        return `The committed cursor of token "${this.token}" of extractor ${this.extractor} (${where}) ` +
          `does not match the cursor Schema: ${detail}`
      }
      case "WrongToken":
        return `The cursor at ${where} belongs to token "${String(this.cause)}", not to token "${this.token}" of ` +
          `extractor ${this.extractor}: tokens map to cursor partitions by position, so the token list ` +
          `may only grow at its end, never be reordered.`
      case "Tombstone":
        return `The committed cursor of token "${this.token}" of extractor ${this.extractor} (${where}) is a ` +
          `tombstone. Write a valid cursor for the token, or delete the cursor topic to start over.`
    }
  }
}

/**
 * The extractor's token list cannot be used: it is empty, has duplicates, or
 * is shorter than the cursor topic (a token was removed, which would shift
 * every later token onto another token's cursor).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidTokens extends Data.TaggedError("InvalidTokens")<{
  readonly reason: "Empty" | "Duplicate" | "Removed"
  readonly extractor: string
  readonly detail: string
}> {
  override get message(): string {
    return `Invalid tokens for extractor ${this.extractor} (${this.reason}): ${this.detail}`
  }
}

/**
 * A read of the source took longer than the extractor's `timeout`. Fatal
 * unless the extractor's `retry` schedule retries it.
 *
 * @since 0.1.0
 * @category errors
 */
export class ReadTimeout extends Data.TaggedError("ReadTimeout")<{
  readonly extractor: string
  readonly token: string
  readonly timeout: Duration.Duration
}> {
  override get message(): string {
    return `Reading the source of token "${this.token}" of extractor ${this.extractor} timed out after ` +
      `${Duration.format(this.timeout)}`
  }
}
