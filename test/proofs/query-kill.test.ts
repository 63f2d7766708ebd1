/**
 * Interactive queries while an instance is SIGKILLed (issue 33's proof): three instances of a
 * counting app over 12 partitions, two in this process (a, b) and one a child process (c). The
 * app tags every value it writes with the transform attempt that wrote it
 * (`test/apps/queryCountTopology.ts`), so a value no committed output names was never committed.
 *
 * Queries run continuously, without retries, while input keeps flowing: the typed client at a
 * (every key's state, `totals` value and `steps` windows, and a range scan of every partition),
 * plain HTTP at b (the same by key, forwarded to each key's owner), and plain HTTP at a in a tight
 * loop on one key X of c's. c then holds X's transaction open (its transform wrote X's next count
 * to its stores and never returns), X is asked at c through a while it is held, and c is
 * SIGKILLed with the transaction still open. The group moves c's partitions to a and b, which
 * restore them from their changelogs; input stops, and the queries run until every answer of a
 * round at every asker is the final committed value.
 *
 * Every answer is then judged against the committed output topic (read_committed):
 * - a key's value (state, `totals`) is right when the committed output holds that very value (its
 *   count and tag) for the key, and is not below what that asker saw of that query and key before;
 * - a key's windows are right when they are windows 1..m of the key, each the committed value of
 *   its count, m not below what the asker saw before;
 * - a scan is right when it holds every key once, each right as a key's value;
 * - otherwise only a typed retry is right: `NotReady`, `NotHere` or `Unreachable` (the client's
 *   reasons; plain HTTP: a 503 NotReady, a 404 NotHere, a refused connection).
 * Anything else (an uncommitted value, a value older than one already answered, a key not
 * found, a partial scan, another error) is wrong. X's answers while c held its transaction open
 * are its count before the held record, and the held value is never committed.
 *
 * `npm run test:proofs` runs it, not `npm test`: 25 s (of test) on a quiet moment of a 2-core
 * machine shared with other runs, 90 s at a load of 25, 200 s at a load of 32.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, Option, Ref, Schedule, Schema } from "effect"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as path from "node:path"
import { QueryClient } from "../../src/index.ts"
import { partitionOf } from "../../src/internal/query/partitioner.ts"
import { queryCounter, Steps, Tagged, Totals } from "../apps/queryCountTopology.ts"
import { spawnApp } from "../helpers/appProcess.ts"
import { brokers, caughtUp, createTopics, eventually, kafka, readCommitted, startInstance, unique } from "../helpers/kafka.ts"
import { tempDir } from "../helpers/tempDir.ts"

const app = path.join(import.meta.dirname, "..", "apps", "query-count.ts")
const partitions = 12
/** The largest window start asked (far above any count here). */
const farTime = 1_000_000_000

/** What one query answered. */
type Answer =
  | { readonly _tag: "Value"; readonly value: Tagged }
  | { readonly _tag: "Windows"; readonly windows: ReadonlyArray<{ readonly start: number; readonly value: Tagged }> }
  | { readonly _tag: "Retry"; readonly reason: string }
  | { readonly _tag: "Wrong"; readonly detail: string }

/** One answer, as asked: by whom (`asker`), what (`query`: state, totals, steps, range) and when. */
interface Observation {
  readonly asker: string
  readonly query: string
  readonly key: string
  readonly answer: Answer
  readonly at: number
  /** The instance that read it (`x-skein-served-by`), for plain HTTP. */
  readonly servedBy?: string | undefined
}

/** The committed values of each key, by count (index count - 1). */
type Committed = ReadonlyMap<string, ReadonlyArray<Tagged>>

const same = (a: Tagged, b: Tagged | undefined) => b !== undefined && a.count === b.count && a.by === b.by

/** The wrong answers of `observations`, judged against `committed` (see the file's comment). */
const judge = (observations: ReadonlyArray<Observation>, committed: Committed): ReadonlyArray<string> => {
  const wrong: Array<string> = []
  const seen = new Map<string, number>()
  for (const o of observations) {
    const where = `${o.asker} ${o.query} ${o.key} at +${o.at}${o.servedBy === undefined ? "" : ` (served by ${o.servedBy})`}`
    const values = committed.get(o.key) ?? []
    const progress = `${o.asker} ${o.query} ${o.key}`
    const monotone = (n: number) => {
      const before = seen.get(progress) ?? 0
      if (n < before) wrong.push(`${where}: count ${n} after ${before} was answered`)
      seen.set(progress, Math.max(before, n))
    }
    switch (o.answer._tag) {
      case "Retry":
        break
      case "Wrong":
        wrong.push(`${where}: ${o.answer.detail}`)
        break
      case "Value": {
        const { value } = o.answer
        if (!same(value, values[value.count - 1])) {
          wrong.push(`${where}: ${JSON.stringify(value)} was never committed (committed: ${JSON.stringify(values[value.count - 1] ?? null)})`)
        }
        monotone(value.count)
        break
      }
      case "Windows": {
        const { windows } = o.answer
        const off = windows.findIndex((w, i) => w.start !== (i + 1) * 1000 || w.value.count !== i + 1 || !same(w.value, values[i]))
        if (windows.length === 0) wrong.push(`${where}: no windows`)
        else if (off !== -1) {
          wrong.push(`${where}: window ${off + 1} ${JSON.stringify(windows[off])} is not the committed ${JSON.stringify(values[off] ?? null)}`)
        }
        monotone(windows.length)
        break
      }
    }
  }
  return wrong
}

/** A JSON answer's value as the app's value, or why it is not one. */
const taggedOf = (json: unknown): Either.Either<Tagged, string> =>
  Either.mapLeft(Schema.decodeUnknownEither(Tagged)(json), (e) => `not a value: ${JSON.stringify(json)}: ${e.message}`)

const KeyAnswer = Schema.Struct({ found: Schema.Boolean, value: Schema.Unknown })
const WindowsAnswer = Schema.Struct({ windows: Schema.Array(Schema.Struct({ start: Schema.Number, value: Tagged })) })
const ErrorAnswer = Schema.Struct({ error: Schema.String })

/** A plain HTTP GET's answer: a value or windows (`windows`), a typed retry, or wrong. */
const httpGet = (url: string, windows: boolean) =>
  Effect.promise(async (): Promise<{ readonly answer: Answer; readonly servedBy: string | undefined }> => {
    let response: Response
    try {
      response = await fetch(url, { signal: AbortSignal.timeout(15_000) })
    } catch (cause) {
      return { answer: { _tag: "Retry", reason: `Unreachable (${String(cause)})` }, servedBy: undefined }
    }
    const servedBy = response.headers.get("x-skein-served-by") ?? undefined
    const text = await response.text()
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      return { answer: { _tag: "Wrong", detail: `status ${response.status}, not JSON: ${text.slice(0, 200)}` }, servedBy }
    }
    if (response.status !== 200) {
      const error = Option.getOrUndefined(Schema.decodeUnknownOption(ErrorAnswer)(json))?.error
      const retry = (response.status === 503 && error === "NotReady") || (response.status === 404 && error === "NotHere")
      return {
        answer: retry ? { _tag: "Retry", reason: error ?? "" } : { _tag: "Wrong", detail: `status ${response.status}: ${text.slice(0, 300)}` },
        servedBy
      }
    }
    if (windows) {
      const page = Schema.decodeUnknownEither(WindowsAnswer)(json)
      return {
        answer: Either.isRight(page)
          ? { _tag: "Windows", windows: page.right.windows }
          : { _tag: "Wrong", detail: `not windows: ${text.slice(0, 300)}` },
        servedBy
      }
    }
    const body = Schema.decodeUnknownEither(KeyAnswer)(json)
    if (Either.isLeft(body) || !body.right.found) return { answer: { _tag: "Wrong", detail: `not found: ${text.slice(0, 300)}` }, servedBy }
    const value = taggedOf(body.right.value)
    return { answer: Either.isRight(value) ? { _tag: "Value", value: value.right } : { _tag: "Wrong", detail: value.left }, servedBy }
  })

describe("interactive queries under SIGKILL", () => {
  it.scopedLive("an instance SIGKILLed with a transaction open while queries run: every answer is a committed value or a typed retry, and right again once the group settles", () =>
    Effect.gen(function*() {
      const input = unique("qk-in")
      const output = unique("qk-out")
      const applicationId = unique("qk-app")
      yield* createTopics([{ name: input, partitions }, { name: output, partitions }])
      const names = { input, output }
      const t0 = Date.now()

      // c: a child process, holding a "stall" record's transaction open.
      const child = yield* spawnApp(app, {
        SKEIN_APPLICATION_ID: applicationId,
        KAFKA_BROKERS: brokers().join(","),
        CHAOS_INPUT_TOPIC: input,
        CHAOS_OUTPUT_TOPIC: output,
        SKEIN_STATE_DIR: yield* tempDir("skein-qk-c-"),
        SKEIN_QUERY_PORT: "0",
        // A SIGKILLed member leaves the group when its session expires: the broker's minimum.
        SKEIN_SESSION_TIMEOUT: "6 seconds",
        SKEIN_HEARTBEAT_INTERVAL: "1 second",
        QUERY_APP_INSTANCE: "c",
        QUERY_APP_STALL: "1"
      })
      const childTail = () => child.output().split("\n").filter((l) => !l.startsWith("{\"event\":\"stats\"")).slice(-30).join("\n")
      const childAssigned = (): ReadonlyArray<number> => {
        const stats = child.output().split("\n").filter((l) => l.startsWith("{\"event\":\"stats\"")).pop()
        return stats === undefined ? [] : (JSON.parse(stats) as { readonly assigned: ReadonlyArray<number> }).assigned
      }
      const settings = { applicationId, queryPort: 0 }
      const a = yield* startInstance(queryCounter(names, { name: "a", stall: false }), { ...settings, stateDir: yield* tempDir("skein-qk-a-") })
      const b = yield* startInstance(queryCounter(names, { name: "b", stall: false }), { ...settings, stateDir: yield* tempDir("skein-qk-b-") })
      yield* eventually(
        Effect.sync(() =>
          a.stats.assigned.size === 4 && b.stats.assigned.size === 4 && childAssigned().length === 4 &&
          a.stats.queryPort !== undefined && b.stats.queryPort !== undefined
        ),
        { what: "four partitions on each of the three instances", timeout: 180_000 }
      ).pipe(Effect.tapError(() => Effect.logError(`c's output:\n${childTail()}`)))
      const atA = `127.0.0.1:${a.stats.queryPort}`
      const atB = `127.0.0.1:${b.stats.queryPort}`
      const counter = queryCounter(names, { name: "test", stall: false })
      // The routes as a knows them: c's endpoint among them.
      const routed = yield* QueryClient.make({ endpoints: [atA] }).pipe(Effect.provide(FetchHttpClient.layer))
      let atC = ""
      yield* eventually(
        Effect.map(routed.metadata, (m) => {
          atC = m.instances.find((i) => i.endpoint !== atA && i.endpoint !== atB)?.endpoint ?? ""
          return m.unrouted.length === 0 && m.instances.length === 3 && m.instances.every((i) => i.active.length === 4)
        }),
        { what: "a's routes to name the three instances, four partitions each", timeout: 120_000 }
      )
      const cPartitions = new Set(childAssigned())

      // Two keys on each partition; key i gets (i mod 3) + 1 records first.
      const candidates = Array.from({ length: 300 }, (_, i) => `key-${String(i).padStart(3, "0")}`)
      const keys = Array.from({ length: partitions }, (_, p) => candidates.filter((key) => partitionOf(key, partitions) === p).slice(0, 2)).flat()
      const cKeys = keys.filter((key) => cPartitions.has(partitionOf(key, partitions)))
      const held = cKeys[0] ?? ""
      const heldCount = (keys.indexOf(held) % 3) + 1
      const producer = kafka().producer({ idempotent: true, maxInFlightRequests: 1 })
      yield* Effect.acquireRelease(Effect.promise(() => producer.connect()), () => Effect.promise(() => producer.disconnect()))
      const send = (records: ReadonlyArray<{ readonly key: string; readonly value: string }>) =>
        Effect.promise(() => producer.send({ topic: input, acks: -1, messages: [...records] }))
      yield* send(keys.flatMap((key, i) => Array.from({ length: (i % 3) + 1 }, () => ({ key, value: "inc" }))))
      yield* caughtUp(applicationId, input, 120_000)
      yield* Effect.log(`three instances (c: ${atC}, partitions ${[...cPartitions].join(",")}), first input processed at +${Date.now() - t0} ms`)

      // The askers, each in a loop: every answer observed.
      const observations: Array<Observation> = []
      const observe = (o: Omit<Observation, "at">) => Effect.sync(() => void observations.push({ ...o, at: Date.now() - t0 }))
      /** The final committed value of every key, once input stopped and was all processed. */
      const final = yield* Ref.make(Option.none<ReadonlyMap<string, Tagged>>())
      const rounds = yield* Ref.make(new Map<string, number>())
      const settled = yield* Ref.make(new Map<string, number>())
      /** An answer that is `value`, the key's final committed value. */
      const isFinal = (answer: Answer, value: Tagged | undefined) =>
        value !== undefined &&
        (answer._tag === "Value"
          ? same(answer.value, value)
          : answer._tag === "Windows" && answer.windows.length === value.count && same(answer.windows[value.count - 1]!.value, value))
      /** Runs `round` (its observations from index `from` on) forever, counting its rounds and the settled ones. */
      const loop = (asker: string, round: Effect.Effect<void>) =>
        Effect.gen(function*() {
          const from = observations.length
          yield* round
          const mine = observations.slice(from).filter((o) => o.asker === asker)
          yield* Ref.update(rounds, (m) => new Map(m).set(asker, (m.get(asker) ?? 0) + 1))
          const finalValues = yield* Ref.get(final)
          if (Option.isSome(finalValues) && mine.length > 0 && mine.every((o) => isFinal(o.answer, finalValues.value.get(o.key)))) {
            yield* Ref.update(settled, (m) => new Map(m).set(asker, (m.get(asker) ?? 0) + 1))
          }
          yield* Effect.sleep("20 millis")
        }).pipe(Effect.forever, Effect.fork)

      // The typed client at a, without retries.
      const client = yield* QueryClient.make({ endpoints: [atA], retry: Schedule.stop, timeout: "10 seconds" })
        .pipe(Effect.provide(FetchHttpClient.layer))
      const typed = <A>(query: string, key: string, ask: Effect.Effect<A, QueryClient.QueryClientError>, answer: (a: A) => Answer) =>
        Effect.flatMap(Effect.either(ask), (result) =>
          observe({
            asker: "client@a",
            query,
            key,
            answer: Either.isRight(result)
              ? answer(result.right)
              : result.left.reason === "NotReady" || result.left.reason === "NotHere" || result.left.reason === "Unreachable"
              ? { _tag: "Retry", reason: result.left.reason }
              : { _tag: "Wrong", detail: result.left.message }
          }))
      const valueOrWrong = (value: Option.Option<Tagged>): Answer =>
        Option.match(value, { onNone: () => ({ _tag: "Wrong", detail: "not found" }), onSome: (v) => ({ _tag: "Value", value: v }) })
      // Each key's queries in order, a few keys at a time.
      const clientRound = Effect.gen(function*() {
        yield* Effect.forEach(keys, (key) =>
          Effect.all([
            typed("state", key, client.state(counter, key), valueOrWrong),
            typed("totals", key, client.get(Totals, key), valueOrWrong),
            typed("steps", key, client.windows(Steps, key, 0, farTime), (ws) => ({
              _tag: "Windows",
              windows: ws.map((w) => ({ start: w.start, value: w.value }))
            }))
          ]), { concurrency: 4, discard: true })
        const scan = yield* Effect.either(client.range(Totals, { limit: 1000 }))
        if (Either.isLeft(scan)) {
          const reason = scan.left.reason
          const retry = reason === "NotReady" || reason === "NotHere" || reason === "Unreachable"
          yield* observe({ asker: "client@a", query: "range", key: "*", answer: retry ? { _tag: "Retry", reason } : { _tag: "Wrong", detail: scan.left.message } })
        } else {
          const found = scan.right.entries.map((e) => e.key)
          if (JSON.stringify(found) !== JSON.stringify([...keys].sort())) {
            yield* observe({ asker: "client@a", query: "range", key: "*", answer: { _tag: "Wrong", detail: `the scan's keys: ${JSON.stringify(found)}` } })
          }
          for (const entry of scan.right.entries) {
            yield* observe({ asker: "client@a", query: "range", key: entry.key, answer: { _tag: "Value", value: entry.value } })
          }
        }
      })
      // Plain HTTP at b, forwarded to each key's owner.
      const http = (asker: string, at: string, query: string, key: string) =>
        Effect.flatMap(
          httpGet(
            query === "state"
              ? `http://${at}/state/count/${key}`
              : query === "totals"
              ? `http://${at}/stores/totals/keys/${key}`
              : `http://${at}/stores/steps/windows/${key}?from=0&to=${farTime}&limit=1000`,
            query === "steps"
          ),
          ({ answer, servedBy }) => observe({ asker, query, key, answer, servedBy })
        )
      const httpRound = Effect.forEach(
        keys,
        (key) => Effect.forEach(["state", "totals", "steps"], (q) => http("http@b", atB, q, key), { discard: true }),
        { concurrency: 4, discard: true }
      )
      // The held key at a, in a tight loop.
      const heldRound = Effect.forEach(["totals", "steps"], (q) => http("held@a", atA, q, held), { discard: true })
      const askers = [loop("client@a", clientRound), loop("http@b", httpRound), loop("held@a", heldRound)]
      const fibers = yield* Effect.all(askers)
      const roundsOf = (asker: string) => Effect.map(Ref.get(rounds), (m) => m.get(asker) ?? 0)
      yield* eventually(Effect.map(Effect.all([roundsOf("client@a"), roundsOf("http@b")]), ([x, y]) => x >= 1 && y >= 1), {
        what: "a round of each asker before the kill",
        timeout: 120_000
      })

      // Input keeps flowing (every key but the held one), before and after the kill.
      const flowing = yield* Effect.fork(Effect.forever(Effect.zipRight(
        send(keys.filter((key) => key !== held).map((key) => ({ key, value: "inc" }))),
        Effect.sleep("500 millis")
      )))

      // c holds the held key's transaction open; it is asked there (through a) while held.
      yield* send([{ key: held, value: "stall" }])
      yield* eventually(Effect.sync(() => child.output().includes("\"event\":\"stalled\"")), {
        what: "c to hold the stalled record's transaction open",
        timeout: 120_000
      }).pipe(Effect.tapError(() => Effect.logError(`c's output:\n${childTail()}`)))
      const stalledAt = Date.now() - t0
      yield* Effect.log(`c holds ${held}'s transaction open at +${stalledAt} ms; rounds so far ${JSON.stringify([...yield* Ref.get(rounds)])}`)
      const stalledLine = child.output().split("\n").find((l) => l.includes("\"event\":\"stalled\"")) ?? "{}"
      const heldValue = (JSON.parse(stalledLine) as { readonly value: Tagged }).value
      const askedAtC = () =>
        observations.filter((o) => o.asker === "held@a" && o.at > stalledAt && o.servedBy === atC && o.answer._tag !== "Retry")
      const [clientBefore, httpBefore] = yield* Effect.all([roundsOf("client@a"), roundsOf("http@b")])
      yield* eventually(
        Effect.map(
          Effect.all([roundsOf("client@a"), roundsOf("http@b")]),
          ([x, y]) => x >= clientBefore + 2 && y >= httpBefore + 2 && askedAtC().length >= 2
        ),
        { what: "every key asked while c holds the transaction open (the held key at c)", timeout: 120_000 }
      ).pipe(Effect.tapError(() =>
        Effect.flatMap(Ref.get(rounds), (rounds_) => Effect.log(
          `rounds ${JSON.stringify([...rounds_])}, last answers ${JSON.stringify([...observations.reduce((m, o) => m.set(o.asker, o.at), new Map<string, number>())])}; ` +
            `held@a after the stall: ${JSON.stringify(observations.filter((o) => o.asker === "held@a" && o.at > stalledAt).slice(-5))}; ` +
            `c's output:\n${childTail()}`
        ))
      ))

      yield* child.signal("SIGKILL")
      const killedAt = Date.now() - t0
      assert.strictEqual(yield* child.exited, null, "c ended by SIGKILL")
      yield* eventually(
        Effect.sync(() => a.stats.assigned.size + b.stats.assigned.size === partitions),
        { what: "a and b to run all 12 partitions", timeout: 120_000 }
      )
      const movedAt = Date.now() - t0
      yield* Effect.log(`c SIGKILLed at +${killedAt} ms; a and b run all 12 partitions at +${movedAt} ms`)
      yield* Effect.sleep("1 second")
      yield* Fiber.interrupt(flowing)
      yield* caughtUp(applicationId, input, 120_000)

      // The committed output: each key's values by count (exactly once: counts 1..n in order).
      const committed = new Map<string, Array<Tagged>>()
      for (const record of (yield* readCommitted(output)).sort((x, y) => x.offset - y.offset)) {
        const values = committed.get(record.key ?? "") ?? []
        const value = Schema.decodeUnknownSync(Tagged)(JSON.parse(record.value ?? "null"))
        assert.strictEqual(value.count, values.length + 1, `${record.key}'s committed counts run 1..n: ${JSON.stringify([...values, value])}`)
        values.push(value)
        committed.set(record.key ?? "", values)
      }
      const latest = new Map([...committed].map(([key, values]) => [key, values[values.length - 1]!]))
      assert.deepStrictEqual([...latest.keys()].sort(), [...keys].sort())
      yield* Ref.set(final, Option.some(latest))
      yield* Effect.log(`input processed, the output read at +${Date.now() - t0} ms: waiting for a settled round of each asker`)
      // Every asker's round all final values (or a wrong answer seen: reported below).
      yield* eventually(
        Effect.map(Ref.get(settled), (m) =>
          ["client@a", "http@b", "held@a"].every((asker) => (m.get(asker) ?? 0) >= 1) ||
          judge(observations, committed).length > 0),
        { what: "a round of every asker with every answer the final committed value", timeout: 120_000 }
      )
      yield* Effect.forEach(fibers, Fiber.interrupt, { discard: true })

      const all = [...observations]
      const wrong = judge(all, committed)
      const count = (filter: (o: Observation) => boolean) => all.filter(filter).length
      const retries = new Map<string, number>()
      for (const o of all) {
        if (o.answer._tag !== "Retry") continue
        const kind = `${o.asker} ${o.answer.reason.split(" ")[0]}`
        retries.set(kind, (retries.get(kind) ?? 0) + 1)
      }
      const onC = (o: Observation) => cKeys.includes(o.key)
      yield* Effect.log(
        `c (partitions ${[...cPartitions].join(",")}) held ${held}'s count ${heldValue.count} (${heldValue.by}) open at +${stalledAt} ms, ` +
          `SIGKILLed at +${killedAt} ms; a and b ran all 12 partitions at +${movedAt} ms. ${all.length} answers: ` +
          `${count((o) => o.answer._tag !== "Retry")} values (${count((o) => onC(o) && o.answer._tag !== "Retry" && o.at > killedAt)} of c's keys after the kill), ` +
          `typed retries ${JSON.stringify([...retries])}; ${askedAtC().length} answers of ${held} read at c while held; ${wrong.length} wrong`
      )
      assert.deepStrictEqual(wrong.slice(0, 20), [], `${wrong.length} wrong answers`)
      // While held: X answered at c with its committed count, never the held write; the held write never committed.
      const whileHeld = askedAtC().filter((o) => o.at < killedAt)
      assert.isAtLeast(whileHeld.length, 2)
      for (const o of whileHeld) {
        const count = o.answer._tag === "Value" ? o.answer.value.count : o.answer._tag === "Windows" ? o.answer.windows.length : -1
        assert.strictEqual(count, heldCount, `${held} at c while held: ${JSON.stringify(o.answer)}`)
      }
      assert.isFalse((committed.get(held) ?? []).some((v) => v.by === heldValue.by), `c's held write ${heldValue.by} never committed`)
      assert.strictEqual(committed.get(held)?.[heldCount]?.count, heldCount + 1, "the held record committed once, by a or b")
      // c's keys answered by their new owners after the kill, through both askers.
      for (const asker of ["client@a", "http@b"]) {
        assert.isAbove(count((o) => o.asker === asker && onC(o) && o.at > killedAt && o.answer._tag !== "Retry"), 0, asker)
      }
    }), { timeout: 900_000 })
})
