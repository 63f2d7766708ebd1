/**
 * What a table-table join emits for one table change: Kafka Streams 4.4's
 * `KTableKTableInnerJoin`, `KTableKTableLeftJoin`, `KTableKTableRightJoin`
 * and `KTableKTableOuterJoin` processors, for a change of either side and
 * the other side's current value (its value getter: the stored value through
 * the side's table operators).
 *
 * - inner: nothing while the other side has no value; else the joined value,
 *   or a deletion when the change deletes.
 * - left, a change of the left side: with no right value, nothing for a
 *   deletion of a key that had no (left) value, else the joined value with
 *   `null` or a deletion; with one, as inner.
 * - left, a change of the right side: nothing while the left has no value;
 *   else the left value joined with the new right value or `null` (never a
 *   deletion).
 * - outer: nothing for a deletion when neither side has a value (before or
 *   now); else the joined value of both sides, either `null`, or a deletion
 *   when both are gone.
 *
 * Every update emits, even one that changes nothing, and a repeated deletion
 * emits again where the other side has a value (as Kafka Streams without a
 * cache). The result's timestamp is the larger of the change's and the
 * other side's value's.
 *
 * Both sides of every kind send their previous values to the join (Kafka
 * Streams' `sendOldValues`, probed with its `TopologyTestDriver` 4.4: a
 * `filter` feeding an inner join passes on no change that deletes what it
 * had not passed either), so a change reaching a join always carries it.
 *
 * @internal
 */
import type * as Graph from "./graph.ts"

/** A table change reaching the join: its new value, its previous one (where the side sends it), its timestamp. */
export interface Change {
  /** `null`: deleted. */
  readonly value: unknown
  /** `null`: none, or not sent (a side that does not need it: an inner join's, a left join's right side). */
  readonly previous: unknown
  readonly timestamp: number
}

/** The other side's value for the key and its timestamp; `null` value: none. */
export interface Other {
  readonly value: unknown
  readonly timestamp: number
}

/** The join's change for the key: the joined value (`null`: deleted) and its timestamp. */
export interface Joined {
  readonly value: unknown
  readonly timestamp: number
}

/**
 * The join's change after `change` of one side (`fromLeft`), given the other
 * side's value: `undefined` when the join emits nothing. `joiner` takes the
 * left value first, either `null` where the kind allows it.
 */
export const onChange = (
  kind: Graph.TableJoin["kind"],
  fromLeft: boolean,
  change: Change,
  other: Other,
  joiner: (left: unknown, right: unknown) => unknown
): Joined | undefined => {
  const join = (mine: unknown, theirs: unknown) => fromLeft ? joiner(mine, theirs) : joiner(theirs, mine)
  const hasOther = other.value !== null
  const timestamp = hasOther ? Math.max(change.timestamp, other.timestamp) : change.timestamp
  switch (kind) {
    case "inner":
      if (!hasOther) return undefined
      return { value: change.value === null ? null : join(change.value, other.value), timestamp }
    case "left":
      if (!fromLeft) {
        // Kafka Streams' KTableKTableRightJoin: the left value joined with the right's, or with null.
        if (!hasOther) return undefined
        return { value: join(change.value, other.value), timestamp }
      }
      if (!hasOther && change.value === null && change.previous === null) return undefined
      return { value: change.value === null ? null : join(change.value, other.value), timestamp }
    case "outer":
      if (!hasOther && change.value === null && change.previous === null) return undefined
      return { value: hasOther || change.value !== null ? join(change.value, other.value) : null, timestamp }
  }
}
