/**
 * Which Kafka release a broker runs, read from the broker itself: an
 * ApiVersions v3 request (KIP-584), whose answer lists the range of
 * `metadata.version` feature levels the broker's software supports. Every
 * Kafka minor release adds levels, so the highest supported level names the
 * release line (4.4.x: 33, 3.9.x: 21), whatever the cluster has finalized. The
 * test runs use it to refuse a broker that is not the version they claim to test.
 */
import * as Net from "node:net"
import { Data, Duration, Effect } from "effect"
import type { KafkaVersion } from "../../src/testing/LocalKafka.ts"

/** A broker could not be asked, or is not the version a run claims. */
export class BrokerVersionError extends Data.TaggedError("BrokerVersionError")<{
  readonly reason: "Unreachable" | "BadResponse" | "WrongVersion"
  readonly detail: string
}> {
  override get message(): string {
    return this.detail
  }
}

/** The highest `metadata.version` level each supported release line's software knows (measured). */
export const metadataVersionMax: Readonly<Record<KafkaVersion, number>> = {
  "4.4.0": 33,
  "3.9.2": 21
}

/** The supported `metadata.version` levels of one broker. */
export interface SupportedLevels {
  readonly address: string
  readonly min: number
  readonly max: number
}

/** The release line a `metadata.version` maximum belongs to, if it is one Skein knows. */
export const releaseOf = (max: number): string | undefined => {
  const found = Object.entries(metadataVersionMax).find(([, level]) => level === max)
  return found === undefined ? undefined : found[0].replace(/\.\d+$/, ".x")
}

const API_VERSIONS = 18

/** An ApiVersions v3 request (request header v2, flexible body). */
const apiVersionsRequest = (correlationId: number): Buffer => {
  const clientId = Buffer.from("skein-version-check")
  const software = Buffer.from("skein-tests")
  const softwareVersion = Buffer.from("0")
  const header = Buffer.alloc(8)
  header.writeInt16BE(API_VERSIONS, 0)
  header.writeInt16BE(3, 2)
  header.writeInt32BE(correlationId, 4)
  const clientIdLength = Buffer.alloc(2)
  clientIdLength.writeInt16BE(clientId.length, 0)
  const body = Buffer.concat([
    header,
    clientIdLength,
    clientId,
    Buffer.from([0]), // header tagged fields
    Buffer.from([software.length + 1]),
    software,
    Buffer.from([softwareVersion.length + 1]),
    softwareVersion,
    Buffer.from([0]) // body tagged fields
  ])
  const size = Buffer.alloc(4)
  size.writeInt32BE(body.length, 0)
  return Buffer.concat([size, body])
}

/** Reads the supported `metadata.version` range from an ApiVersions v3 response body (after the size). */
export const parseSupportedMetadataVersion = (response: Buffer): { readonly min: number; readonly max: number } | string => {
  let at = 4 // response header v0: the correlation id only
  const uvarint = (): number => {
    let value = 0
    let shift = 0
    for (;;) {
      if (at >= response.length) throw new RangeError("truncated")
      const byte = response[at++] ?? 0
      value |= (byte & 0x7f) << shift
      if ((byte & 0x80) === 0) return value
      shift += 7
    }
  }
  const compactString = (): string => {
    const length = uvarint() - 1
    const text = response.toString("utf8", at, at + length)
    at += length
    return text
  }
  try {
    const errorCode = response.readInt16BE(at)
    at += 2
    if (errorCode !== 0) return `ApiVersions v3 answered with error code ${errorCode}`
    const apis = uvarint() - 1
    for (let i = 0; i < apis; i++) {
      at += 6 // api key, min and max version
      const tags = uvarint()
      for (let t = 0; t < tags; t++) {
        uvarint()
        at += uvarint()
      }
    }
    at += 4 // throttle time
    const tags = uvarint()
    for (let t = 0; t < tags; t++) {
      const tag = uvarint()
      const size = uvarint()
      const end = at + size
      if (tag === 0) { // SupportedFeatures
        const features = uvarint() - 1
        for (let f = 0; f < features; f++) {
          const name = compactString()
          const min = response.readInt16BE(at)
          const max = response.readInt16BE(at + 2)
          at += 4
          const featureTags = uvarint()
          for (let ft = 0; ft < featureTags; ft++) {
            uvarint()
            at += uvarint()
          }
          if (name === "metadata.version") return { min, max }
        }
      }
      at = end
    }
    return "the broker lists no supported metadata.version (a ZooKeeper-mode or pre-3.3 broker)"
  } catch (cause) {
    return `unreadable ApiVersions v3 response: ${String(cause)}`
  }
}

/** Asks one broker (`host:port`, plaintext) which `metadata.version` levels its software supports. */
export const supportedLevels = (address: string): Effect.Effect<SupportedLevels, BrokerVersionError> =>
  Effect.async<SupportedLevels, BrokerVersionError>((resume) => {
    const separator = address.lastIndexOf(":")
    const host = address.slice(0, separator)
    const port = Number(address.slice(separator + 1))
    let received = Buffer.alloc(0)
    const socket = Net.connect({ host, port }, () => socket.write(apiVersionsRequest(1)))
    socket.setTimeout(Duration.toMillis("10 seconds"))
    const fail = (reason: BrokerVersionError["reason"], detail: string) => {
      socket.destroy()
      resume(Effect.fail(new BrokerVersionError({ reason, detail })))
    }
    socket.on("timeout", () => fail("Unreachable", `${address} did not answer ApiVersions within 10 s`))
    socket.on("error", (cause) => fail("Unreachable", `cannot ask ${address} for its API versions: ${cause.message}`))
    socket.on("data", (chunk) => {
      received = Buffer.concat([received, chunk])
      if (received.length < 4 || received.length < 4 + received.readInt32BE(0)) return
      socket.destroy()
      const levels = parseSupportedMetadataVersion(received.subarray(4, 4 + received.readInt32BE(0)))
      if (typeof levels === "string") resume(Effect.fail(new BrokerVersionError({ reason: "BadResponse", detail: `${address}: ${levels}` })))
      else resume(Effect.succeed({ address, ...levels }))
    })
    return Effect.sync(() => socket.destroy())
  })

/**
 * Succeeds with the brokers' levels if every one of them runs the release
 * line of `claimed`; else fails with `WrongVersion`, saying what it runs and
 * how to fix or knowingly override it.
 */
export const verify = (
  brokers: ReadonlyArray<string>,
  claimed: KafkaVersion
): Effect.Effect<ReadonlyArray<SupportedLevels>, BrokerVersionError> =>
  Effect.gen(function*() {
    const found = yield* Effect.forEach(brokers, supportedLevels, { concurrency: "unbounded" })
    const expected = metadataVersionMax[claimed]
    const wrong = found.filter((levels) => levels.max !== expected)
    if (wrong.length === 0) return found
    const described = wrong.map((levels) => {
      const release = releaseOf(levels.max)
      return `${levels.address} supports metadata.version ${levels.min}-${levels.max}` +
        (release === undefined ? " (not a release Skein knows)" : ` (Kafka ${release})`)
    }).join("; ")
    const line = claimed.replace(/\.\d+$/, "")
    return yield* new BrokerVersionError({
      reason: "WrongVersion",
      detail: `this run tests Kafka ${claimed}, but its broker is not Kafka ${line}: ${described}; ` +
        `Kafka ${line}'s highest is ${expected}. Point KAFKA_BROKERS at a Kafka ${line} cluster, ` +
        `or unset it to have ${claimed} started, or set SKEIN_KAFKA_VERSION to the version the cluster runs; ` +
        "SKEIN_ALLOW_ANY_KAFKA_VERSION=1 runs against it anyway (the run then tests whatever version it is)"
    })
  })
