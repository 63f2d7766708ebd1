/**
 * Where each partition's state can be queried: the query endpoint
 * (`host:port`) of the member running its active task, and those of the
 * members keeping a standby copy (KIP-535's standby hosts). Kafka Streams
 * announces `application.server` in each member's subscription and its
 * leader hands every member the whole host map; Skein does the same: each
 * member announces its endpoint in its subscription's `userData`
 * (`kafka/assignor.ts`), and the group leader sends every member the routes
 * of the generation it planned, as a marker topic of its assignment (kafkajs
 * does not expose an assignment's `userData`), so every instance knows, from
 * its own join, which instance owns which partition.
 *
 * Pure.
 *
 * @internal
 */

/** The routes of one generation, by partition number. */
export interface QueryRoutes {
  /** The endpoint of each partition's active member (`null`: a member without a query endpoint, or none). */
  readonly active: ReadonlyArray<string | null>
  /** The endpoints of the members keeping a standby copy of each partition (never its active one). */
  readonly standbys: ReadonlyArray<ReadonlyArray<string>>
}

/** No routes known (before the first join, or a leader that sent none). */
export const empty: QueryRoutes = { active: [], standbys: [] }

/** The active endpoint of `partition`, if one is known. */
export const activeOf = (routes: QueryRoutes, partition: number): string | undefined => routes.active[partition] ?? undefined

/** The standby endpoints of `partition`. */
export const standbysOf = (routes: QueryRoutes, partition: number): ReadonlyArray<string> => routes.standbys[partition] ?? []

/** Each endpoint with the partitions it runs and keeps standbys of, in endpoint order. */
export const byEndpoint = (
  routes: QueryRoutes
): ReadonlyArray<{ readonly endpoint: string; readonly active: ReadonlyArray<number>; readonly standbys: ReadonlyArray<number> }> => {
  const endpoints = new Map<string, { active: Array<number>; standbys: Array<number> }>()
  const entry = (endpoint: string) => {
    const found = endpoints.get(endpoint)
    if (found !== undefined) return found
    const made = { active: [], standbys: [] }
    endpoints.set(endpoint, made)
    return made
  }
  routes.active.forEach((endpoint, partition) => {
    if (endpoint !== null) entry(endpoint).active.push(partition)
  })
  routes.standbys.forEach((list, partition) => {
    for (const endpoint of list) entry(endpoint).standbys.push(partition)
  })
  return [...endpoints].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([endpoint, { active, standbys }]) => ({
    endpoint,
    active,
    standbys
  }))
}

/**
 * Why `endpoint` cannot be announced as a query endpoint (`host:port`, a
 * bracketed IPv6 host allowed), or `undefined`.
 */
export const invalidEndpoint = (endpoint: string): string | undefined => {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:/?#[\]@,]+):(\d{1,5})$/.exec(endpoint)
  const port = match === null ? Number.NaN : Number(match[2])
  return match !== null && port > 0 && port <= 65535
    ? undefined
    : `${JSON.stringify(endpoint)} is not host:port (a host name or address, a colon, a port from 1 to 65535)`
}

/** Text of the routes as compact JSON: each endpoint once, partitions by its index (-1: none). */
export const encode = (routes: QueryRoutes, withStandbys: boolean = true): string => {
  const endpoints: Array<string> = []
  const index = (endpoint: string): number => {
    const at = endpoints.indexOf(endpoint)
    if (at !== -1) return at
    endpoints.push(endpoint)
    return endpoints.length - 1
  }
  const a = routes.active.map((endpoint) => endpoint === null ? -1 : index(endpoint))
  const s = withStandbys ? routes.standbys.map((list) => list.map(index)) : []
  return JSON.stringify({ e: endpoints, a, s })
}

const isIndexList = (value: unknown): value is ReadonlyArray<number> =>
  Array.isArray(value) && value.every((n) => Number.isSafeInteger(n) && n >= -1)

/** The routes `encode` wrote; `undefined` for text that is not theirs. */
export const decode = (text: string): QueryRoutes | undefined => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof parsed !== "object" || parsed === null || !("e" in parsed) || !("a" in parsed)) return undefined
  const { e, a } = parsed
  const s: unknown = "s" in parsed ? parsed.s : []
  if (!Array.isArray(e) || !e.every((x) => typeof x === "string") || !isIndexList(a)) return undefined
  if (!Array.isArray(s) || !s.every(isIndexList)) return undefined
  const endpoints: ReadonlyArray<string> = e
  const at = (i: number): string | null => (i >= 0 ? endpoints[i] ?? null : null)
  const standbys: Array<ReadonlyArray<string>> = a.map(() => [])
  s.forEach((list: ReadonlyArray<number>, partition: number) => {
    if (partition < standbys.length) standbys[partition] = list.map(at).filter((x): x is string => x !== null)
  })
  return { active: a.map(at), standbys }
}
