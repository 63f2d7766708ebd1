// Kafka Streams peer for the Skein benchmark (bench/README.md).
//
// Stateful per-key count: input key -> running count, one output record per input record
// (record cache disabled), value = the count as a decimal UTF-8 string. The count store is a
// persistent (RocksDB) KeyValueStore with a changelog topic, so a restart on an empty state
// directory restores it from the changelog.
//
// Compiled with plain javac against the jars of bench/peers/streams/pom.xml; the harness does that
// (bench/contenders/kstreams.ts). Speaks the contender protocol: JSON lines on stdout, e.g.
//   {"event":"started","ts":1700000000000}      (main() runs: the JVM is up)
//   {"event":"first-read","ts":1700000000000}
//   {"event":"running","ts":...}
//   {"event":"restore-start","ts":...}
//   {"event":"restore-end","ts":...,"records":12345}
//
// SIGTERM (a graceful stop) closes the instance with LEAVE_GROUP, so that a restarted member
// gets its partitions at once rather than after the old member's session timeout (45 s), as a
// Skein instance leaves its group when it stops; the close may take up to 60 s (flushing the
// stores and writing their checkpoints), and prints whether it finished in time.
//
// --client-config FILE: Java client properties for a secured cluster (security.protocol,
// sasl.*, ssl.*), written by the harness from the SKEIN_* settings (bench/lib/security.ts);
// Kafka Streams hands them to its consumers, producers and admin client.

import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;

public final class SkeinBenchCount {
    private static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    private static final class RestoreEvents implements StateRestoreListener {
        private final Set<TopicPartition> active = new HashSet<>();
        private long restored = 0;
        private boolean started = false;

        @Override
        public synchronized void onRestoreStart(TopicPartition tp, String store, long start, long end) {
            if (!started) {
                started = true;
                emit("{\"event\":\"restore-start\",\"ts\":" + System.currentTimeMillis() + "}");
            }
            // Not an event: where each changelog partition restores from (0 = the whole changelog).
            emit("restoring " + store + " " + tp + " from offset " + start + " to " + end);
            active.add(tp);
        }

        @Override
        public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long numRestored) {}

        @Override
        public synchronized void onRestoreEnd(TopicPartition tp, String store, long totalRestored) {
            restored += totalRestored;
            active.remove(tp);
            if (active.isEmpty()) {
                emit("{\"event\":\"restore-end\",\"ts\":" + System.currentTimeMillis()
                        + ",\"records\":" + restored + "}");
            }
        }

        @Override
        public synchronized void onRestoreSuspended(TopicPartition tp, String store, long totalRestored) {
            restored += totalRestored;
            active.remove(tp);
        }
    }

    public static void main(String[] args) throws Exception {
        emit("{\"event\":\"started\",\"ts\":" + System.currentTimeMillis() + "}");
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) a.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        String brokers = a.get("brokers");
        String input = a.get("input");
        String output = a.get("output");
        String group = a.get("group");
        String stateDir = a.get("state-dir");
        String mode = a.getOrDefault("mode", "eos");
        String commitMs = a.get("commit-interval-ms");
        String threads = a.getOrDefault("threads", "1");
        if (brokers == null || input == null || output == null || group == null || stateDir == null) {
            System.err.println("usage: SkeinBenchCount --brokers B --input T --output T --group G --state-dir D"
                    + " [--mode eos|alos] [--commit-interval-ms N] [--threads N] [--client-config FILE]");
            System.exit(2);
        }

        Properties p = new Properties();
        String clientConfig = a.get("client-config");
        if (clientConfig != null) {
            try (InputStream in = new FileInputStream(clientConfig)) {
                p.load(in);
            }
        }
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, group);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
                mode.equals("alos") ? StreamsConfig.AT_LEAST_ONCE : StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
        // One output per input, as every contender does: no record cache in front of the store.
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        if (commitMs != null) p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitMs);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), "5");

        StreamsBuilder b = new StreamsBuilder();
        AtomicBoolean firstRead = new AtomicBoolean(false);
        b.stream(input, Consumed.with(Serdes.String(), Serdes.ByteArray()))
                .peek((k, v) -> {
                    if (!firstRead.get() && firstRead.compareAndSet(false, true)) {
                        emit("{\"event\":\"first-read\",\"ts\":" + System.currentTimeMillis() + "}");
                    }
                })
                .groupByKey()
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .mapValues(v -> String.valueOf(v))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setGlobalStateRestoreListener(new RestoreEvents());
        AtomicLong runningAt = new AtomicLong(0);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING && runningAt.compareAndSet(0, System.currentTimeMillis())) {
                emit("{\"event\":\"running\",\"ts\":" + runningAt.get() + "}");
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) done.countDown();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("stream thread failed: " + e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                    .SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            long t0 = System.currentTimeMillis();
            boolean closed = streams.close(CloseOptions.timeout(Duration.ofSeconds(60))
                    .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
            emit("closed (leaving the group): " + (closed ? "clean" : "timed out") + " after "
                    + (System.currentTimeMillis() - t0) + " ms");
        }));
        streams.start();
        done.await();
        System.exit(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
    }
}
