/**
 * The tables' changelogs as the topology keeps them, checked against what
 * the brokers hold before any sub-topology runs, so that no table starts
 * from an empty or a stale store without saying so:
 *
 * - a table read with `sourceChangelog` (its topic is its changelog,
 *   `SourceChangelog.ts`): its topic must be compacted (a deleting one loses
 *   the keys a restore needs), and its sub-topology's changelog topic must
 *   not be left from a run without it (no longer written, a later run
 *   without `sourceChangelog` would restore that stale copy);
 * - a sub-topology with tables and a changelog topic: when that topic does
 *   not exist yet while its group has committed offsets on a table's topic,
 *   its store would start without the records read before (they were kept
 *   in the source topic with `sourceChangelog`, or the changelog was
 *   deleted).
 *
 * Each failure names the table and the topic, with the fix.
 *
 * @internal
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import type { SkeinConfig } from "../../SkeinConfig.ts"
import type { RunnerError } from "../../SkeinError.ts"
import { ConfigurationError } from "../../SkeinError.ts"
import { changelogTopic } from "../../Transformer.ts"
import * as Admin from "../kafka/admin.ts"
import { makeKafka } from "../kafka/client.ts"
import { applicationIdOf } from "../runtime/runAll.ts"
import type * as Compile from "./compile.ts"
import type * as Graph from "./graph.ts"

/** Fails for a table whose changelog the brokers do not hold as the topology needs it (see the module's doc). */
export const check = (compiled: Compile.Compiled, config: SkeinConfig): Effect.Effect<void, RunnerError, Scope.Scope> =>
  Effect.gen(function*() {
    const tabled = compiled.subTopologies.flatMap((sub) => {
      const tables = (compiled.members[sub.index] ?? []).filter((n): n is Graph.TableSource => n._tag === "TableSource")
      return tables.length === 0 ? [] : [{ sub, tables }]
    })
    if (tabled.length === 0) return
    const admin = yield* Admin.make(yield* makeKafka(config))
    for (const { sub, tables } of tabled) {
      const groupId = applicationIdOf(config.applicationId, sub.transformer)
      const changelog = changelogTopic(groupId, sub.transformer)
      const existing = yield* admin.partitionCount(changelog)
      const source = sub.sourceChangelog
      const table = tables.find((t) => t.sourceChangelog)
      if (source !== undefined && table !== undefined) {
        const name = compiled.names.get(table) ?? source
        yield* checkCompacted(admin, name, source)
        if (existing !== undefined) {
          return yield* new ConfigurationError({
            problem: `The table "${name}" is read with sourceChangelog (its store restored from ${source}), and its ` +
              `sub-topology's changelog topic ${changelog} exists, written by a run without sourceChangelog: it would no ` +
              "longer be written, and a later run without sourceChangelog would restore that stale copy",
            fix: `Stop the application, delete ${changelog} (kafka-topics.sh --bootstrap-server <broker> --delete --topic ` +
              `${changelog}) and start it with sourceChangelog: the stores are restored from ${source} up to the ` +
              "committed offsets, nothing is lost. Or drop sourceChangelog to keep the changelog topic"
          })
        }
        continue
      }
      if (existing !== undefined) continue
      for (const t of tables) {
        const name = compiled.names.get(t) ?? t.topics.map((topic) => topic.name).join(", ")
        for (const topic of t.topics) {
          const committed = yield* admin.groupOffsets(groupId, topic.name)
          if (!committed.some((p) => p.offset > 0)) continue
          return yield* new ConfigurationError({
            problem: `The table "${name}" is kept in the changelog topic ${changelog}, which does not exist, while the ` +
              `group ${groupId} has committed offsets on ${topic.name}: the table would start empty, without the records ` +
              `read before (they were kept in ${topic.name} with sourceChangelog, or ${changelog} was deleted)`,
            fix: `Read the table with sourceChangelog again (KTable.from(topic, { sourceChangelog: true })); or, with the ` +
              `application stopped, reset the group's offsets of ${topic.name} to the earliest so the table is read again ` +
              `(kafka-consumer-groups.sh --bootstrap-server <broker> --group ${groupId} --topic ${topic.name} ` +
              "--reset-offsets --to-earliest --execute; its changes are then processed again)"
          })
        }
      }
    }
  })

/** Fails for a source changelog that is not compacted; warns for one that also deletes. */
const checkCompacted = (admin: Admin.KafkaAdmin, table: string, topic: string): Effect.Effect<void, RunnerError> =>
  Effect.gen(function*() {
    const policy = yield* admin.cleanupPolicy(topic)
    if (policy === undefined) {
      return yield* Effect.logWarning(
        `the table "${table}" is read with sourceChangelog and the cleanup.policy of ${topic} could not be read ` +
          "(DESCRIBE_CONFIGS not granted): it must be compact, or a restore misses the keys whose records were deleted"
      )
    }
    const policies = policy.split(",").map((p) => p.trim())
    const set = `kafka-configs.sh --bootstrap-server <broker> --alter --entity-type topics --entity-name ${topic} ` +
      "--add-config cleanup.policy=compact"
    if (!policies.includes("compact")) {
      return yield* new ConfigurationError({
        problem: `The table "${table}" is read with sourceChangelog, and its topic ${topic} is not compacted ` +
          `(cleanup.policy=${policy}): its records are deleted by retention, and a restore from it would miss their keys`,
        fix: `Compact the topic (${set}), or read the table without sourceChangelog (its sub-topology then writes a ` +
          "changelog topic)"
      })
    }
    if (policies.includes("delete")) {
      yield* Effect.logWarning(
        `the table "${table}" is read with sourceChangelog and ${topic} also deletes by retention ` +
          `(cleanup.policy=${policy}): a restore misses the keys whose records were deleted. Set it to compact only: ${set}`
      )
    }
  })
