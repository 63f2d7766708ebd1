/**
 * The check of a transformer's named stores at its task's first batch:
 * their names are valid and distinct, and each existing store was written
 * with the kind and Schemas it is declared with now. A store's declaration
 * is kept in the task's store (`keys.schemaKey`) and changelogged with its
 * entries, written with the first batch that commits; a store whose
 * declaration changed fails the task with the fix, never reading its entries
 * with the wrong Schema or silently starting empty.
 *
 * @internal
 */
import { Effect } from "effect"
import type { StateStoreError } from "../../SkeinError.ts"
import type { StateStore, StoreWrite } from "./StateStore.ts"
import type { Declaration } from "./access.ts"
import { invalidName, schemaKey } from "./keys.ts"

/** The declared form of a store, as kept. */
const declaredForm = (declaration: Declaration): string => `${declaration.kind} ${declaration.schema}`

/** Why a transformer's store declarations cannot run (an invalid or repeated name), or `undefined`. */
export const invalidDeclarations = (transformer: string, declarations: ReadonlyArray<Declaration>): string | undefined => {
  const seen = new Map<string, Declaration>()
  for (const declaration of declarations) {
    const invalid = invalidName(declaration.name)
    if (invalid !== undefined) return `${transformer}: ${invalid}`
    const other = seen.get(declaration.name)
    if (other !== undefined) {
      return `${transformer} declares two stores named "${declaration.name}" (a ${other.kind} and a ${declaration.kind}): ` +
        "store names are one namespace per transformer; give each store its own name"
    }
    seen.set(declaration.name, declaration)
  }
  return undefined
}

/** The stores whose declarations were found in the store as declared (checked once per opened store). */
const checked = new WeakMap<StateStore, Set<string>>()

/**
 * Checks the declarations against the task's store. Returns the writes of
 * declarations the store does not hold yet (a new store), to commit with
 * the batch; dies, with the fix, on an invalid or repeated name or a
 * declaration that differs from the stored one.
 */
export const check = (
  store: StateStore,
  declarations: ReadonlyArray<Declaration>,
  where: { readonly transformer: string; readonly partition: number }
): Effect.Effect<ReadonlyArray<StoreWrite>, StateStoreError> =>
  Effect.gen(function*() {
    const invalid = invalidDeclarations(where.transformer, declarations)
    if (invalid !== undefined) return yield* Effect.dieMessage(invalid)
    const done = checked.get(store) ?? new Set<string>()
    checked.set(store, done)
    const unchecked = declarations.filter((d) => !done.has(d.name))
    if (unchecked.length === 0) return []
    const stored = yield* store.getMany(unchecked.map((d) => schemaKey(d.name)))
    const writes: Array<StoreWrite> = []
    for (const [i, declaration] of unchecked.entries()) {
      const was = stored[i]
      const now = declaredForm(declaration)
      if (was === undefined) {
        writes.push({ key: schemaKey(declaration.name), value: now })
      } else if (was === now) {
        done.add(declaration.name)
      } else {
        return yield* Effect.dieMessage(
          `${where.transformer}: store "${declaration.name}" (task ${where.partition}, ${store.path}) holds entries ` +
            `written as ${was}, but it is declared as ${now} now. Keep the declaration it was written with, give the ` +
            `changed store a new name (it starts empty; the old one's entries stay unread), or start from empty ` +
            `state (a new applicationId, or delete the changelog topic and the state directory)`
        )
      }
    }
    return writes
  })
