// Kafka Streams peer of the benchmark's windowed job (bench/lib/windowed.ts, bench/README.md
// "Windowed job").
//
// The input grouped by a second key read from the value (the text before its first ';', through
// a repartition topic), counted per second key in tumbling one-minute windows of event time (the
// records' timestamps, the default extractor) with --grace-ms of grace, final results only:
// suppress(untilWindowCloses(unbounded())), Kafka Streams' final results that agree with Skein's
// (docs/streams.md, "Deviations": EmitStrategy.onWindowClose() loses windows). Written as key
// "<second key>@<window start>" and value the count as a decimal string.
//
// exactly_once_v2, one stream thread, the record cache at its default (10 MiB: it only thins the
// updates the suppression buffer and the changelogs see, not the final results). Compiled with
// SkeinBenchCount.java by the harness (bench/contenders/kstreams.ts). Contender protocol on
// stdout: {"event":"started"}, {"event":"first-read"}, {"event":"running"}. SIGTERM closes the
// instance (leaving the group).

import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.WindowStore;

public final class SkeinBenchWindowed {
    private static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
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
        String graceMs = a.get("grace-ms");
        String commitMs = a.get("commit-interval-ms");
        if (brokers == null || input == null || output == null || group == null || stateDir == null || graceMs == null) {
            System.err.println("usage: SkeinBenchWindowed --brokers B --input T --output T --group G --state-dir D"
                    + " --grace-ms N [--commit-interval-ms N] [--client-config FILE]");
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
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        if (commitMs != null) p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitMs);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), "5");

        StreamsBuilder b = new StreamsBuilder();
        AtomicBoolean firstRead = new AtomicBoolean(false);
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .peek((k, v) -> {
                    if (!firstRead.get() && firstRead.compareAndSet(false, true)) {
                        emit("{\"event\":\"first-read\",\"ts\":" + System.currentTimeMillis() + "}");
                    }
                })
                .groupBy((k, v) -> v.substring(0, v.indexOf(';')), Grouped.with("by-group", Serdes.String(), Serdes.String()))
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofMillis(Long.parseLong(graceMs))))
                .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("counts-per-minute")
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                .toStream()
                .map((w, v) -> KeyValue.pair(w.key() + "@" + w.window().start(), String.valueOf(v)))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
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
            boolean closed = streams.close(CloseOptions.timeout(Duration.ofSeconds(60))
                    .withGroupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
            emit("closed (leaving the group): " + (closed ? "clean" : "timed out"));
        }));
        streams.start();
        done.await();
        System.exit(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
    }
}
