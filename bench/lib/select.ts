/** `--only`: which contenders a benchmark run takes. */

/**
 * The contenders `--only` names, in the harness's order. Each entry selects the contender of
 * that exact name when there is one (`skein-eos` is the Node row alone, not also
 * `skein-eos-bun` and `skein-eos-deno`), otherwise every contender whose name starts with it
 * (`skein` = all Skein rows, `kafka-perf` = both ceilings). Without `--only`, all of them.
 */
export const selectContenders = <C extends { readonly name: string }>(
  all: ReadonlyArray<C>,
  only: ReadonlyArray<string> | undefined,
): ReadonlyArray<C> => {
  if (only === undefined) return all
  const names = new Set(all.map((c) => c.name))
  return all.filter((c) => only.some((o) => (names.has(o) ? c.name === o : c.name.startsWith(o))))
}
