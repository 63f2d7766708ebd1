/**
 * One transformer per `applicationId`. A transformer's consumer group is the
 * `applicationId` and its transactional ids are `{applicationId}-{partition}`
 * (stable for existing deployments, as in Kafka Streams: one application id,
 * one topology), so two transformers under one `applicationId` would share
 * the group and fence each other's producers forever.
 *
 * Two guards keep the second one out: before joining, `check` describes the
 * group and fails with a `ConfigurationError` when a live member runs another
 * transformer; and when both join at once, the group leader's assignor
 * (`kafka/assignor.ts`) gives the partitions only to the transformer that
 * joined first, and the other one's members fail on its rejection marker.
 *
 * An extractor does not collide with a transformer of the same
 * `applicationId`: its group and transactional ids carry its name
 * (`{applicationId}-extract-{name}`, `{applicationId}-extract-{name}-{token}`).
 *
 * @internal
 */
import { Effect } from "effect"
import type { ConfigurationError, KafkaError } from "../../SkeinError.ts"
import type { KafkaAdmin } from "../kafka/admin.ts"
import { ownerConflict } from "../kafka/assignor.ts"

/**
 * Fails with a `ConfigurationError` when a live member of `groupId` runs
 * another owner than `owner`. Members that announce nothing (an older Skein)
 * are accepted.
 */
export const check = (
  admin: KafkaAdmin,
  options: { readonly groupId: string; readonly owner: string }
): Effect.Effect<void, ConfigurationError | KafkaError> =>
  Effect.flatMap(admin.groupMembers(options.groupId), (members) => {
    const other = members.find((m) => m.membership !== undefined && m.membership.owner !== options.owner)
    return other?.membership === undefined
      ? Effect.void
      : Effect.fail(ownerConflict(options.groupId, other.membership.owner, options.owner))
  })
