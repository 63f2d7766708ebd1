/**
 * A versioned table's versions of one key (Kafka Streams' versioned key-value
 * store, KIP-889, as its `RocksDBVersionedStore` answers): each record is a
 * version valid from its timestamp until the next version's; a tombstone is
 * a version without a value. The table keeps the versions a lookup within
 * its history retention can still need, and the latest one always.
 *
 * - **put**: a record older than the table's stream time (the largest
 *   timestamp it was given) minus the history retention is dropped; else it
 *   becomes a version (replacing one with the same timestamp), out of order
 *   too, and the stream time moves on.
 * - **get as of `t`**: the latest version when it is not after `t`; else,
 *   when `t` is older than stream time minus the history retention, none;
 *   else the version valid at `t`, if any.
 *
 * @internal
 */
import { Schema } from "effect"

/** A version: its value (`null`: a tombstone) and the timestamp it is valid from. */
export interface Version<V> {
  readonly v: V | null
  readonly t: number
}

/** How a key's versions are stored, the values in `value`'s form: oldest first. */
export const versionsSchema = <V, I>(value: Schema.Schema<V, I>): Schema.Schema<ReadonlyArray<Version<V>>, ReadonlyArray<Version<I>>> =>
  Schema.Array(Schema.Struct({ v: Schema.NullOr(value), t: Schema.Number }))

/** The versions after a record at `timestamp`, given the table's stream time after it; `undefined`: the record is dropped (expired). */
export const put = <V>(
  versions: ReadonlyArray<Version<V>>,
  value: V | null,
  timestamp: number,
  streamTime: number,
  historyMs: number
): ReadonlyArray<Version<V>> | undefined => {
  if (timestamp < streamTime - historyMs) return undefined
  const now = Math.max(streamTime, timestamp)
  const kept = versions.filter((version) => version.t !== timestamp)
  const at = kept.findIndex((version) => version.t > timestamp)
  const inserted = at === -1 ? [...kept, { v: value, t: timestamp }] : [...kept.slice(0, at), { v: value, t: timestamp }, ...kept.slice(at)]
  return prune(inserted, now, historyMs)
}

/** Without the versions no lookup can return any more (valid only until before stream time minus the history), nor a leading tombstone. */
const prune = <V>(versions: ReadonlyArray<Version<V>>, streamTime: number, historyMs: number): ReadonlyArray<Version<V>> => {
  let first = 0
  while (first < versions.length - 1 && versions[first + 1]!.t <= streamTime - historyMs) first++
  while (first < versions.length && versions[first]!.v === null && first < versions.length - 1) first++
  const kept = versions.slice(first)
  return kept.length === 1 && kept[0]!.v === null && kept[0]!.t <= streamTime - historyMs ? [] : kept
}

/** The value as of `asOf` (`null`: none). */
export const get = <V>(versions: ReadonlyArray<Version<V>>, asOf: number, streamTime: number, historyMs: number): V | null => {
  const latest = versions[versions.length - 1]
  if (latest === undefined) return null
  if (latest.t <= asOf) return latest.v
  if (asOf < streamTime - historyMs) return null
  let found: Version<V> | undefined
  for (const version of versions) {
    if (version.t > asOf) break
    found = version
  }
  return found === undefined ? null : found.v
}
