// Kafka Streams peer of the benchmark's enrichment job (bench/lib/enrichment.ts, bench/README.md
// "Enrichment job").
//
// The table topic (--table, compacted) read as a table (builder.table, materialized in RocksDB),
// and each record of the input left-joined with the table's value for its key, written with the
// record's key and the value "<the input value before its first ';'>|<the table value, or '-'>".
//
// exactly_once_v2, one stream thread, defaults otherwise: the record cache at its 10 MiB, no
// topology optimization (so the table keeps its own changelog topic, as Skein's does), the
// producer's and consumer's Kafka Streams defaults. Compiled with SkeinBenchCount.java by the
// harness (bench/contenders/kstreams.ts). Contender protocol on stdout: {"event":"started"},
// {"event":"first-read"} (the first input record), {"event":"running"}. SIGTERM closes the
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
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

public final class SkeinBenchEnrichment {
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
        String table = a.get("table");
        String output = a.get("output");
        String group = a.get("group");
        String stateDir = a.get("state-dir");
        String commitMs = a.get("commit-interval-ms");
        if (brokers == null || input == null || table == null || output == null || group == null || stateDir == null) {
            System.err.println("usage: SkeinBenchEnrichment --brokers B --input T --table T --output T --group G --state-dir D"
                    + " [--commit-interval-ms N] [--client-config FILE]");
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

        StreamsBuilder b = new StreamsBuilder();
        KTable<String, String> customers = b.table(table, Consumed.with(Serdes.String(), Serdes.String()),
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("enrichment-table")
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.String()));
        AtomicBoolean firstRead = new AtomicBoolean(false);
        b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .peek((k, v) -> {
                    if (!firstRead.get() && firstRead.compareAndSet(false, true)) {
                        emit("{\"event\":\"first-read\",\"ts\":" + System.currentTimeMillis() + "}");
                    }
                })
                .leftJoin(customers, (v, t) -> v.substring(0, v.indexOf(';')) + "|" + (t == null ? "-" : t))
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
