/**
 * Effects composed eagerly: the stream DSL's per-record work without the
 * fiber runtime where nothing in it needs one.
 *
 * An `Exit` is an Effect that is already done (what `Effect.succeed`,
 * `Effect.fail`, `Effect.void` and `Effect.die` return). These combinators
 * look at the step before them: when it is an `Exit`, the next step runs at
 * once, in the same call, and their result is an `Exit` again; from the
 * first step that is not (a state read from the store, a user's effectful
 * operator, a log line) the rest is composed with Effect's own combinators
 * and runs when that Effect runs. One way of writing the data path, two
 * speeds: a record whose steps are all done at once never enters the
 * runtime, and one that needs it gets the same steps in the same order.
 *
 * What makes it correct: a step is built where it runs. Code written with
 * these runs each step as it is built, so an Effect made early and run
 * later (`Effect.zipRight(a, b)` with `b` built before `a` ran) would run
 * `b` first; write `flatMap(a, () => b)`. And a step is built once per run:
 * never hold one to run twice.
 *
 * A throw in a step that runs at once is thrown to the caller (where a lazy
 * step's throw becomes a defect of its fiber): `catchSomeDefect` treats
 * both alike.
 *
 * @internal
 */
import { Cause, Effect, Either, Exit, Option } from "effect"
import type { YieldWrap } from "effect/Utils"
import { yieldWrapGet } from "effect/Utils"

/**
 * Whether `self` is done: an `Exit`, with `self`'s success and error types. An effect to run (a
 * transform's `Effect.sync`) has no `_tag`: one property lookup, not `isExit`'s symbol checks.
 */
export const isDone = <A, E, R>(self: Effect.Effect<A, E, R>): self is Exit.Exit<A, E> => "_tag" in self && Exit.isExit(self)

/** An `Effect.sync`: its function, called by the runtime when the Effect runs. */
type SyncStep<A, E, R> = Effect.Effect<A, E, R> & { readonly _op: "Sync"; readonly effect_instruction_i0: () => A }
/** An `Effect.suspend` (what `Effect.gen` makes): its body, made by the runtime when the Effect runs. */
type CommitStep<A, E, R> = Effect.Effect<A, E, R> & { readonly _op: "Commit"; readonly commit: () => Effect.Effect<A, E, R> }
/** A `flatMap` (what `Effect.map` and `Effect.gen`'s `yield*` make): the Effect, then its continuation. */
type FlatMapStep<A, E, R> = Effect.Effect<A, E, R> & {
  readonly _op: "OnSuccess"
  readonly effect_instruction_i0: Effect.Effect<unknown, E, R>
  readonly effect_instruction_i1: (a: unknown) => Effect.Effect<A, E, R>
}

/** A running `Effect.gen`: its generator, resumed by the runtime with each yielded step's value. */
type IteratorStep<A, E, R> = Effect.Effect<A, E, R> & {
  readonly _op: "Iterator"
  readonly effect_instruction_i0: Iterator<YieldWrap<Effect.Effect<unknown, E, R>>, A, unknown>
}

const isSync = <A, E, R>(self: Effect.Effect<A, E, R>): self is SyncStep<A, E, R> =>
  "_op" in self && self._op === "Sync" && "effect_instruction_i0" in self && typeof self.effect_instruction_i0 === "function"
const isCommit = <A, E, R>(self: Effect.Effect<A, E, R>): self is CommitStep<A, E, R> =>
  "_op" in self && self._op === "Commit" && "commit" in self && typeof self.commit === "function"
const isFlatMap = <A, E, R>(self: Effect.Effect<A, E, R>): self is FlatMapStep<A, E, R> =>
  "_op" in self && self._op === "OnSuccess" && "effect_instruction_i1" in self &&
  typeof self.effect_instruction_i1 === "function" && "effect_instruction_i0" in self && Effect.isEffect(self.effect_instruction_i0)

const isIterator = <A, E, R>(self: Effect.Effect<A, E, R>): self is IteratorStep<A, E, R> =>
  "_op" in self && self._op === "Iterator" && "effect_instruction_i0" in self && typeof self.effect_instruction_i0 === "object" &&
  self.effect_instruction_i0 !== null && "next" in self.effect_instruction_i0 && typeof self.effect_instruction_i0.next === "function"

/** How deep `runNow` goes into an Effect's steps before it leaves the rest to the runtime. */
const maxDepth = 64

/**
 * `self`, with the steps Effect's runtime would take first, in the same order, taken now where
 * none needs a fiber: an `Effect.sync`'s function is called, an `Effect.suspend`'s (an
 * `Effect.gen`'s) body is made, a `flatMap`'s continuation is called with a value that is done.
 * A transform written as `Effect.sync(...)`, or as a generator that yields only done steps, is
 * an `Exit` then, handled in the same call as one written with `Effect.succeed`; from the first
 * step that needs the runtime (an asynchronous one, a service, a log line) the rest is returned
 * for the runtime to run, as it was. A throw is thrown to the caller, as every step run at once
 * throws (`catchSomeDefect`).
 *
 * It reads an Effect's instruction (`_op` and its operands), which Effect's runtime dispatches
 * on; an Effect of another shape is left to the runtime (`test/unit/eager.test.ts` pins the
 * shapes to the installed Effect).
 */
export const runNow = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => stepFrom(self, 0)

const stepFrom = <A, E, R>(self: Effect.Effect<A, E, R>, depth: number): Effect.Effect<A, E, R> => {
  let current = self
  for (let steps = depth; steps < maxDepth; steps++) {
    if (isDone(current)) return current
    if (isSync(current)) return Exit.succeed(current.effect_instruction_i0())
    if (isCommit(current)) {
      current = current.commit()
      continue
    }
    if (isIterator(current)) {
      const depth = steps + 1
      return resumeFrom(current.effect_instruction_i0, undefined, (step) => stepFrom(step, depth))
    }
    if (!isFlatMap(current)) return current
    const first = stepFrom(current.effect_instruction_i0, steps + 1)
    if (!isDone(first)) return first === current.effect_instruction_i0 ? current : Effect.flatMap(first, current.effect_instruction_i1)
    if (first._tag === "Failure") return Exit.failCause(first.cause)
    current = current.effect_instruction_i1(first.value)
  }
  return current
}

/**
 * A generator resumed with `input`, as the runtime resumes it: each yielded step, as `take` makes
 * it (the step itself, or the step with what of it runs at once taken now), resumes the generator
 * in the same call while it is done; the rest runs when the first that is not runs.
 */
const resumeFrom = <A, E, R>(
  iterator: Iterator<YieldWrap<Effect.Effect<unknown, E, R>>, A, unknown>,
  input: unknown,
  take: (step: Effect.Effect<unknown, E, R>) => Effect.Effect<unknown, E, R>
): Effect.Effect<A, E, R> => {
  let state = iterator.next(input)
  while (state.done !== true) {
    const step = take(yieldWrapGet(state.value))
    if (!isDone(step)) return Effect.flatMap(step, (value) => resumeFrom(iterator, value, take))
    if (step._tag === "Failure") return Exit.failCause(step.cause)
    state = iterator.next(step.value)
  }
  return Exit.succeed(state.value)
}

/** A yielded step as it is (`gen`'s: only a step that is already done resumes at once). */
const asItIs = <A, E, R>(step: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => step

/** `f` of `self`'s value: at once when `self` is done (an `Exit`), else when `self` runs. */
export const flatMap = <A, E, R, B, E2, R2>(
  self: Effect.Effect<A, E, R>,
  f: (a: A) => Effect.Effect<B, E2, R2>
): Effect.Effect<B, E | E2, R | R2> => {
  if (!isDone(self)) return Effect.flatMap(self, f)
  return self._tag === "Success" ? f(self.value) : Exit.failCause(self.cause)
}

/** `f` of `self`'s value, eagerly (`flatMap`, without a continuation made when `self` is done). */
export const map = <A, E, R, B>(self: Effect.Effect<A, E, R>, f: (a: A) => B): Effect.Effect<B, E, R> => {
  if (!isDone(self)) return Effect.map(self, f)
  return self._tag === "Success" ? Exit.succeed(f(self.value)) : Exit.failCause(self.cause)
}

/** An `Either` as an `Exit` (an `Either` is an Effect, but not a done one). */
export const fromEither = <A, E>(either: Either.Either<A, E>): Exit.Exit<A, E> =>
  Either.isRight(either) ? Exit.succeed(either.right) : Exit.fail(either.left)

/** `f` of each item in order, each after the previous one finished (`Effect.forEach` with `discard`), eagerly. */
export const forEach = <A, E, R>(
  items: Iterable<A>,
  f: (item: A) => Effect.Effect<void, E, R>
): Effect.Effect<void, E, R> => {
  // An array (the operators' children, an operator's records): by index, no iterator or continuation made while done.
  if (isArray(items)) return forEachFrom(items, 0, f)
  const iterator = items[Symbol.iterator]()
  const rest = (): Effect.Effect<void, E, R> => {
    for (let next = iterator.next(); next.done !== true; next = iterator.next()) {
      const step = f(next.value)
      if (!isDone(step)) return Effect.flatMap(step, rest)
      if (step._tag === "Failure") return step
    }
    return Exit.void
  }
  return rest()
}

const isArray = <A>(items: Iterable<A>): items is ReadonlyArray<A> => Array.isArray(items)

/** `forEach` of an array's items from index `from`, read as they are reached (as its iterator reads them). */
const forEachFrom = <A, E, R>(
  items: ReadonlyArray<A>,
  from: number,
  f: (item: A) => Effect.Effect<void, E, R>
): Effect.Effect<void, E, R> => {
  for (let i = from; i < items.length; i++) {
    const step = f(items[i]!)
    if (!isDone(step)) {
      const next = i + 1
      return Effect.flatMap(step, () => forEachFrom(items, next, f))
    }
    if (step._tag === "Failure") return step
  }
  return Exit.void
}

/** The error and context of the Effects a generator given to `gen` yields. */
type ErrorOf<Y> = Y extends YieldWrap<Effect.Effect<infer _A, infer E, infer _R>> ? E : never
type ContextOf<Y> = Y extends YieldWrap<Effect.Effect<infer _A, infer _E, infer R>> ? R : never

/**
 * `Effect.gen`, eagerly: the generator runs at once, each `yield*` of a done
 * step resumed in the same call; at the first step that is not done, the
 * rest of the generator runs when that step's Effect runs. Unlike
 * `Effect.gen`, the body runs when `gen` is called.
 */
export function gen<Y extends YieldWrap<Effect.Effect<unknown, unknown, unknown>>, A>(
  body: () => Generator<Y, A, unknown>
): Effect.Effect<A, ErrorOf<Y>, ContextOf<Y>>
export function gen<A>(
  body: () => Generator<YieldWrap<Effect.Effect<unknown, unknown, unknown>>, A, unknown>
): Effect.Effect<A, unknown, unknown> {
  return resumeFrom(body(), undefined, asItIs)
}

/**
 * `Effect.catchSomeDefect` of what `self` makes, eagerly: a throw while
 * making it, or a defect it dies with, is given to `pf`.
 */
export const catchSomeDefect = <A, E, R, A2, E2, R2>(
  self: () => Effect.Effect<A, E, R>,
  pf: (defect: unknown) => Option.Option<Effect.Effect<A2, E2, R2>>
): Effect.Effect<A | A2, E | E2, R | R2> => {
  let made: Effect.Effect<A, E, R>
  try {
    made = self()
  } catch (defect) {
    made = Exit.die(defect)
  }
  if (!isDone(made)) return Effect.catchSomeDefect(made, pf)
  if (made._tag === "Success") return made
  const defect = Cause.dieOption(made.cause)
  if (Option.isNone(defect)) return made
  const recovered = pf(defect.value)
  return Option.isSome(recovered) ? recovered.value : made
}
