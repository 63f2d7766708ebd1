/**
 * Connects a kafkajs admin client to BROKERS, lists the topics a few times
 * and disconnects: the smallest program whose requests go through kafkajs's
 * request queue. Run by test/kafkajs-timers.test.ts under Bun and Deno.
 */
import kafkajs from "kafkajs"

const brokers = (process.env["BROKERS"] ?? "").split(",")
const admin = new kafkajs.Kafka({ clientId: "timers", brokers, logLevel: kafkajs.logLevel.NOTHING }).admin()
await admin.connect()
for (let i = 0; i < 5; i++) {
  await admin.listTopics()
  await new Promise((resolve) => setTimeout(resolve, 20))
}
await admin.disconnect()
console.log("done")
