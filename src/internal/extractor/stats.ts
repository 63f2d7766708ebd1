/**
 * Observable counters of a running extractor (for tests and health checks).
 *
 * @internal
 */

export interface ExtractorStats {
  /** Reads of the source that returned a page. */
  pagesRead: number
  /** Pages committed: one transaction each. */
  pagesCommitted: number
  /** Drained reads that emitted nothing and kept the cursor: nothing to commit. */
  emptyPolls: number
  recordsEmitted: number
  tokensStarted: number
  tokensStopped: number
  /** Tokens whose commit was fenced by a newer owner. */
  migrations: number
  rebalances: number
  /** The tokens this instance owns now. */
  readonly owned: Set<string>
  /** The last cursor this instance committed per token, in its wire form. */
  readonly committed: Map<string, string>
}

export const makeStats = (): ExtractorStats => ({
  pagesRead: 0,
  pagesCommitted: 0,
  emptyPolls: 0,
  recordsEmitted: 0,
  tokensStarted: 0,
  tokensStopped: 0,
  migrations: 0,
  rebalances: 0,
  owned: new Set(),
  committed: new Map()
})
