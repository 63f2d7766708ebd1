/**
 * States the batch stores once, as it ends, instead of as each record that
 * changed them finishes.
 *
 * The batch turns each state change into its stored form (and checks that
 * it reads back) when its record finishes, so that a state that cannot be
 * stored fails the record that made it. Some states are Skein's own
 * bookkeeping, storable by construction: a windowed aggregation's task time
 * (its stream time, which nearly every record moves) and its index of
 * windows by close time. A transformer marked with `storedAtEnd` names them;
 * the batch keeps their changes decoded, and stores only each key's last
 * kept change, once per transaction.
 *
 * Only for Skein's own transformers: a user's state keeps its check per
 * record.
 *
 * @internal
 */

/** The transformers marked by `storedAtEnd`, and which of their states are stored at the end. */
const marks = new WeakMap<object, (state: unknown) => boolean>()

/**
 * Marks `transformer`: a state `atEnd` accepts is storable by construction,
 * and is stored once, for its key's last kept change, as the batch ends.
 */
export const storedAtEnd = <T extends object>(transformer: T, atEnd: (state: unknown) => boolean): T => {
  marks.set(transformer, atEnd)
  return transformer
}

/** Which states of `transformer` are stored at the end of the batch (none for a transformer not marked). */
export const atEndOf = (transformer: object): ((state: unknown) => boolean) | undefined => marks.get(transformer)
