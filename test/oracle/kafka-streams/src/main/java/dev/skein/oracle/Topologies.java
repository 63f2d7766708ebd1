package dev.skein.oracle;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import java.util.function.Function;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.common.utils.Bytes;

/**
 * The registry of named topologies the oracle can run. Every topology reads the topic {@code input}
 * and writes the topic {@code output}; keys are strings, values strings or longs as each entry
 * declares. Windowed results are written with a string key naming the window:
 * {@code key@start} for fixed-size windows (tumbling, hopping: the end is start + size) and
 * {@code key@start/end} for windows whose size varies (session, sliding). Every windowed
 * topology named {@code X} also exists as {@code X-suppressed}: the same aggregation followed by
 * {@code suppress(untilWindowCloses(unbounded()))}, which emits each window's final result once
 * stream time passes its end + grace. The joins (issue 32) read the topics {@code left} and
 * {@code right} instead (string keys and values) and write {@code output} with the value
 * {@code l + "+" + r} ({@code "null"} for a missing side). All durations are in milliseconds.
 */
final class Topologies {
  private Topologies() {}

  /** How a topic's key or value is serialized, and how it is written in JSON. */
  enum Kind {
    /** {@code Serdes.String()}; a JSON string. */
    STRING,
    /** {@code Serdes.Long()}; a JSON integer. */
    LONG
  }

  /** A topic with the serdes of its keys and values. */
  record TopicSpec(String name, Kind key, Kind value) {}

  /** A named topology: its topics, the params it takes (all required), and how to build it. */
  record Definition(
      String name,
      String doc,
      List<TopicSpec> inputs,
      List<TopicSpec> outputs,
      List<String> params,
      BiConsumer<StreamsBuilder, Params> build) {}

  static final String INPUT = "input";
  static final String LEFT = "left";
  static final String RIGHT = "right";
  static final String OUTPUT = "output";

  private static final Serde<String> S = Serdes.String();
  private static final Serde<Long> L = Serdes.Long();

  private static final Map<String, Definition> REGISTRY = new LinkedHashMap<>();

  static Definition get(String name) {
    Definition definition = REGISTRY.get(name);
    if (definition == null) {
      throw new OracleException("unknown topology \"" + name + "\"; known: " + String.join(", ", REGISTRY.keySet()));
    }
    return definition;
  }

  static List<Definition> all() {
    return new ArrayList<>(REGISTRY.values());
  }

  private static void register(String name, String doc, Kind inputValue, Kind outputValue, List<String> params,
      BiConsumer<StreamsBuilder, Params> build) {
    REGISTRY.put(name, new Definition(name, doc,
        List.of(new TopicSpec(INPUT, Kind.STRING, inputValue)),
        List.of(new TopicSpec(OUTPUT, Kind.STRING, outputValue)),
        params, build));
  }

  /** The asymmetric join window of the {@code -asymmetric} stream-stream joins' params. */
  private static JoinWindows asymmetric(Params p) {
    return JoinWindows.ofTimeDifferenceAndGrace(Duration.ZERO, ms(p, "graceMs")).before(ms(p, "beforeMs")).after(ms(p, "afterMs"));
  }

  private static Duration ms(Params params, String name) {
    return Duration.ofMillis(params.millis(name));
  }

  /**
   * A windowed aggregation: registered as {@code name} (every update) and {@code name-suppressed}
   * (final results only).
   */
  private static void registerWindowed(String name, String doc, Kind inputValue, List<String> params,
      java.util.function.BiFunction<StreamsBuilder, Params, KTable<Windowed<String>, Long>> aggregate,
      boolean variableSize) {
    java.util.function.Function<Windowed<String>, String> windowKey = variableSize
        ? (w) -> w.key() + "@" + w.window().start() + "/" + w.window().end()
        : (w) -> w.key() + "@" + w.window().start();
    register(name, doc + " Emits every update.", inputValue, Kind.LONG, params,
        (builder, p) -> aggregate.apply(builder, p)
            .toStream((w, v) -> windowKey.apply(w))
            .to(OUTPUT, Produced.with(S, L)));
    register(name + "-suppressed", doc + " Emits only final results: suppress(untilWindowCloses(unbounded())).",
        inputValue, Kind.LONG, params,
        (builder, p) -> aggregate.apply(builder, p)
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
            .toStream((w, v) -> windowKey.apply(w))
            .to(OUTPUT, Produced.with(S, L)));
  }

  private static void registerJoin(String name, String doc, List<String> params,
      BiConsumer<StreamsBuilder, Params> build) {
    REGISTRY.put(name, new Definition(name, doc,
        List.of(new TopicSpec(LEFT, Kind.STRING, Kind.STRING), new TopicSpec(RIGHT, Kind.STRING, Kind.STRING)),
        List.of(new TopicSpec(OUTPUT, Kind.STRING, Kind.STRING)),
        params, build));
  }

  private static final ValueJoiner<String, String, String> JOINER = (l, r) -> l + "+" + r;

  private static KStream<String, String> left(StreamsBuilder builder) {
    return builder.stream(LEFT, Consumed.with(S, S));
  }

  private static KTable<String, String> table(StreamsBuilder builder, String topic, String store) {
    return builder.table(topic, Consumed.with(S, S),
        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(store).withKeySerde(S).withValueSerde(S));
  }

  /** The new key of a re-keyed join's stream record: "k" + (n % 20) for the value "l" + n. */
  private static String rekey(String key, String value) {
    return value == null ? null : "k" + (Integer.parseInt(value.substring(1)) % 20);
  }

  /** The number of a join value: n for "l" + n or "r" + n. */
  private static int num(String value) {
    return Integer.parseInt(value.substring(1));
  }

  /** The table of the largest value per key of the stream {@code topic}: groupByKey().reduce(max). */
  private static KTable<String, String> maxTable(StreamsBuilder builder, String topic) {
    return builder.stream(topic, Consumed.with(S, S)).groupByKey(Grouped.with(S, S))
        .reduce((a, b) -> num(a) >= num(b) ? a : b, Materialized.with(S, S));
  }

  /** The table {@code left}, only values whose number is not a multiple of 3. */
  private static KTable<String, String> filteredLeft(StreamsBuilder builder) {
    return table(builder, LEFT, "left-table").filter((k, v) -> num(v) % 3 != 0);
  }

  /** The table {@code right}, only values whose number is not a multiple of 4, upper-cased ("R" + n). */
  private static KTable<String, String> filteredRight(StreamsBuilder builder) {
    return table(builder, RIGHT, "right-table").filter((k, v) -> num(v) % 4 != 0).mapValues((v) -> v.toUpperCase());
  }

  /**
   * The foreign key a value of the table {@code left} names in the table {@code right}: "k" + (n % 14)
   * for the value "l" + n (k12 and k13 never have a right value), none (null) when n % 10 == 0.
   */
  private static String foreignKey(String value) {
    int n = num(value);
    return n % 10 == 0 ? null : "k" + (n % 14);
  }

  /**
   * The processor of {@code process-expiry}: each record is kept in the store {@code pending}
   * ({@code deadline|value}, its deadline its timestamp + ttl, a later record of its key replacing it)
   * and forwarded as {@code seen:value}; a stream-time punctuator every millisecond forwards each
   * key whose deadline stream time has reached, by deadline then key, as {@code expired:value} with
   * the punctuation's time, and deletes it.
   */
  static final class ExpiryProcessor implements Processor<String, String, String, String> {
    private final long ttl;
    private ProcessorContext<String, String> context;
    private KeyValueStore<String, String> pending;

    ExpiryProcessor(long ttl) {
      this.ttl = ttl;
    }

    @Override
    public void init(ProcessorContext<String, String> context) {
      this.context = context;
      this.pending = context.getStateStore("pending");
      context.schedule(Duration.ofMillis(1), PunctuationType.STREAM_TIME, this::expire);
    }

    @Override
    public void process(Record<String, String> record) {
      pending.put(record.key(), (record.timestamp() + ttl) + "|" + record.value());
      context.forward(record.withValue("seen:" + record.value()));
    }

    private static long deadline(String stored) {
      return Long.parseLong(stored.substring(0, stored.indexOf('|')));
    }

    private void expire(long now) {
      List<KeyValue<String, String>> due = new ArrayList<>();
      try (KeyValueIterator<String, String> all = pending.all()) {
        while (all.hasNext()) {
          KeyValue<String, String> entry = all.next();
          if (deadline(entry.value) <= now) due.add(entry);
        }
      }
      due.sort(java.util.Comparator.<KeyValue<String, String>>comparingLong((e) -> deadline(e.value)).thenComparing((e) -> e.key));
      for (KeyValue<String, String> entry : due) {
        pending.delete(entry.key);
        context.forward(new Record<>(entry.key, "expired:" + entry.value.substring(entry.value.indexOf('|') + 1), now));
      }
    }
  }

  static {
    // process-expiry: KStream#process with a key-value store and a stream-time punctuator
    // (ExpiryProcessor): records without a key or value dropped first; every record forwarded as
    // (key, "seen:" + value), each key's latest value forwarded as (key, "expired:" + value) once
    // stream time reaches its timestamp + ttlMs. Params: ttlMs.
    register("process-expiry", "process(ExpiryProcessor, \"pending\"): seen, then expired after ttlMs of stream time.",
        Kind.STRING, Kind.STRING, List.of("ttlMs"),
        (builder, p) -> {
          long ttl = p.millis("ttlMs");
          builder.addStateStore(Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore("pending"), S, S));
          builder.stream(INPUT, Consumed.with(S, S))
              .filter((k, v) -> k != null && v != null)
              .process(() -> new ExpiryProcessor(ttl), "pending")
              .to(OUTPUT, Produced.with(S, S));
        });

    // passthrough: every input record, unchanged (string key and value). No params.
    register("passthrough", "Every input record unchanged.", Kind.STRING, Kind.STRING, List.of(),
        (builder, p) -> builder.stream(INPUT, Consumed.with(S, S)).to(OUTPUT, Produced.with(S, S)));

    // map-filter: keeps records whose value is non-null and of even length, then maps
    // (k, v) -> (k == null ? null : k + ":" + v.length(), v.toUpperCase()). Stateless, no repartition.
    // No params.
    register("map-filter", "filter(value non-null, even length) then map to (key:length, VALUE).",
        Kind.STRING, Kind.STRING, List.of(),
        (builder, p) -> builder.stream(INPUT, Consumed.with(S, S))
            .filter((k, v) -> v != null && v.length() % 2 == 0)
            .map((k, v) -> KeyValue.pair(k == null ? null : k + ":" + v.length(), v.toUpperCase()))
            .to(OUTPUT, Produced.with(S, S)));

    // selectKey-groupByKey-count: re-keys each record by its value (selectKey((k, v) -> v)), which
    // makes Kafka Streams insert a repartition topic, then counts per new key. A record with a null
    // value gets a null key and is dropped by the aggregation. Output: (value, count so far), every
    // update. No params.
    register("selectKey-groupByKey-count", "selectKey(value) through a repartition topic, then count per new key.",
        Kind.STRING, Kind.LONG, List.of(),
        (builder, p) -> builder.stream(INPUT, Consumed.with(S, S))
            .selectKey((k, v) -> v)
            .groupByKey(Grouped.with(S, S))
            .count(Materialized.with(S, L))
            .toStream()
            .to(OUTPUT, Produced.with(S, L)));

    // reduce-sum: per-key running sum of long values (groupByKey().reduce(Long::sum)); null values
    // and null keys are dropped. Output: (key, sum so far), every update. No params.
    register("reduce-sum", "groupByKey().reduce(Long::sum) of long values, every update.",
        Kind.LONG, Kind.LONG, List.of(),
        (builder, p) -> builder.stream(INPUT, Consumed.with(S, L))
            .groupByKey(Grouped.with(S, L))
            .reduce(Long::sum, Materialized.with(S, L))
            .toStream()
            .to(OUTPUT, Produced.with(S, L)));

    // tumbling-count: count per key per tumbling window [start, start + sizeMs), epoch-aligned,
    // TimeWindows.ofSizeAndGrace(sizeMs, graceMs). Output key key@start. Params: sizeMs, graceMs.
    registerWindowed("tumbling-count", "Count per key per tumbling window (sizeMs, graceMs).",
        Kind.STRING, List.of("sizeMs", "graceMs"),
        (builder, p) -> builder.stream(INPUT, Consumed.with(S, S))
            .groupByKey(Grouped.with(S, S))
            .windowedBy(TimeWindows.ofSizeAndGrace(ms(p, "sizeMs"), ms(p, "graceMs")))
            .count(Materialized.with(S, L)),
        false);

    // groupBy-tumbling-count: re-keys each record through a repartition topic by its key's seed
    // prefix (before the first '-') and its value's parity: (s11-k3, v17) -> s11-m1
    // (test/streams/windowCases.ts parityKey); a null key or value gets a null key and is dropped.
    // Then counts per new key per tumbling window, TimeWindows.ofSizeAndGrace(sizeMs, graceMs).
    // Output key key@start. Params: sizeMs, graceMs.
    registerWindowed("groupBy-tumbling-count",
        "groupBy(seed prefix + value parity) through a repartition topic, then count per tumbling window (sizeMs, graceMs).",
        Kind.STRING, List.of("sizeMs", "graceMs"),
        (builder, p) -> builder.stream(INPUT, Consumed.with(S, S))
            .groupBy((k, v) -> k == null || v == null
                ? null
                : k.substring(0, k.indexOf('-')) + "-m" + (Integer.parseInt(v.substring(1)) % 2), Grouped.with(S, S))
            .windowedBy(TimeWindows.ofSizeAndGrace(ms(p, "sizeMs"), ms(p, "graceMs")))
            .count(Materialized.with(S, L)),
        false);

    // hopping-count: count per key per hopping window of sizeMs advancing by advanceMs,
    // TimeWindows.ofSizeAndGrace(sizeMs, graceMs).advanceBy(advanceMs). Output key key@start.
    // Params: sizeMs, advanceMs, graceMs.
    registerWindowed("hopping-count", "Count per key per hopping window (sizeMs, advanceMs, graceMs).",
        Kind.STRING, List.of("sizeMs", "advanceMs", "graceMs"),
        (builder, p) -> builder.stream(INPUT, Consumed.with(S, S))
            .groupByKey(Grouped.with(S, S))
            .windowedBy(TimeWindows.ofSizeAndGrace(ms(p, "sizeMs"), ms(p, "graceMs")).advanceBy(ms(p, "advanceMs")))
            .count(Materialized.with(S, L)),
        false);

    // hopping-sum: sum of long values per key per hopping window (reduce(Long::sum)); null values
    // dropped. Output key key@start. Params: sizeMs, advanceMs, graceMs.
    registerWindowed("hopping-sum", "Sum of long values per key per hopping window (sizeMs, advanceMs, graceMs).",
        Kind.LONG, List.of("sizeMs", "advanceMs", "graceMs"),
        (builder, p) -> builder.stream(INPUT, Consumed.with(S, L))
            .groupByKey(Grouped.with(S, L))
            .windowedBy(TimeWindows.ofSizeAndGrace(ms(p, "sizeMs"), ms(p, "graceMs")).advanceBy(ms(p, "advanceMs")))
            .reduce(Long::sum, Materialized.with(S, L)),
        false);

    // session-count: count per key per session (records within gapMs of each other merge into one
    // session [first, last]), SessionWindows.ofInactivityGapAndGrace(gapMs, graceMs). A merge
    // deletes the merged sessions: in update mode a tombstone (null value) is written for each.
    // Output key key@start/end. Params: gapMs, graceMs.
    registerWindowed("session-count", "Count per key per session window (gapMs, graceMs); merges emit tombstones.",
        Kind.STRING, List.of("gapMs", "graceMs"),
        (builder, p) -> builder.stream(INPUT, Consumed.with(S, S))
            .groupByKey(Grouped.with(S, S))
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(ms(p, "gapMs"), ms(p, "graceMs")))
            .count(Materialized.with(S, L)),
        true);

    // sliding-count: count per key per sliding window [t - timeDifferenceMs, t] (inclusive both
    // ends), SlidingWindows.ofTimeDifferenceAndGrace(timeDifferenceMs, graceMs). Output key
    // key@start/end. Params: timeDifferenceMs, graceMs.
    registerWindowed("sliding-count", "Count per key per sliding window (timeDifferenceMs, graceMs).",
        Kind.STRING, List.of("timeDifferenceMs", "graceMs"),
        (builder, p) -> builder.stream(INPUT, Consumed.with(S, S))
            .groupByKey(Grouped.with(S, S))
            .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(ms(p, "timeDifferenceMs"), ms(p, "graceMs")))
            .count(Materialized.with(S, L)),
        true);

    // stream-table-join / stream-table-left-join: the stream `left` joined with the table `right`
    // (latest value per key; a null value deletes). Only stream records trigger output; null-key
    // or null-value stream records are dropped; inner drops a stream record without a table value,
    // left emits l+null. No params.
    registerJoin("stream-table-join", "left stream join right table (inner).", List.of(),
        (builder, p) -> left(builder).join(table(builder, RIGHT, "right-table"), JOINER, Joined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));
    registerJoin("stream-table-left-join", "left stream leftJoin right table.", List.of(),
        (builder, p) -> left(builder).leftJoin(table(builder, RIGHT, "right-table"), JOINER, Joined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));

    // stream-rekeyed-table-join / -left-join: as stream-table-join / -left-join, with the stream
    // re-keyed first by its value, selectKey((k, v) -> "k" + (n % 20)) for the value "l" + n (a null
    // value keeps a null key), which makes Kafka Streams repartition it before the join. No params.
    registerJoin("stream-rekeyed-table-join", "left stream re-keyed by its value, join right table (inner).", List.of(),
        (builder, p) -> left(builder).selectKey(Topologies::rekey)
            .join(table(builder, RIGHT, "right-table"), JOINER, Joined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));
    registerJoin("stream-rekeyed-table-left-join", "left stream re-keyed by its value, leftJoin right table.", List.of(),
        (builder, p) -> left(builder).selectKey(Topologies::rekey)
            .leftJoin(table(builder, RIGHT, "right-table"), JOINER, Joined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));

    // stream-versioned-table-join / -left-join: as stream-table-join / -left-join, with the table in a versioned store
    // (KIP-889) keeping historyRetentionMs of history: a stream record joins the table value as of
    // its own timestamp. Params: historyRetentionMs.
    registerJoin("stream-versioned-table-join", "left stream join right table in a versioned store (historyRetentionMs).",
        List.of("historyRetentionMs"),
        (builder, p) -> left(builder).join(
                builder.table(RIGHT, Consumed.with(S, S),
                    Materialized.<String, String>as(Stores.persistentVersionedKeyValueStore("right-versioned", ms(p, "historyRetentionMs")))
                        .withKeySerde(S).withValueSerde(S)),
                JOINER, Joined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));
    registerJoin("stream-versioned-table-left-join", "left stream leftJoin right table in a versioned store (historyRetentionMs).",
        List.of("historyRetentionMs"),
        (builder, p) -> left(builder).leftJoin(
                builder.table(RIGHT, Consumed.with(S, S),
                    Materialized.<String, String>as(Stores.persistentVersionedKeyValueStore("right-versioned", ms(p, "historyRetentionMs")))
                        .withKeySerde(S).withValueSerde(S)),
                JOINER, Joined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));

    // stream-stream-join / -left-join / -outer-join: `left` and `right` streams joined when their
    // timestamps differ by at most timeDifferenceMs, JoinWindows.ofTimeDifferenceAndGrace(
    // timeDifferenceMs, graceMs). Left/outer emit l+null (null+r) for an unmatched record once its
    // window plus grace has closed. Params: timeDifferenceMs, graceMs.
    registerJoin("stream-stream-join", "left stream join right stream (timeDifferenceMs, graceMs).",
        List.of("timeDifferenceMs", "graceMs"),
        (builder, p) -> left(builder).join(builder.stream(RIGHT, Consumed.with(S, S)), JOINER,
                JoinWindows.ofTimeDifferenceAndGrace(ms(p, "timeDifferenceMs"), ms(p, "graceMs")), StreamJoined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));
    registerJoin("stream-stream-left-join", "left stream leftJoin right stream (timeDifferenceMs, graceMs).",
        List.of("timeDifferenceMs", "graceMs"),
        (builder, p) -> left(builder).leftJoin(builder.stream(RIGHT, Consumed.with(S, S)), JOINER,
                JoinWindows.ofTimeDifferenceAndGrace(ms(p, "timeDifferenceMs"), ms(p, "graceMs")), StreamJoined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));
    registerJoin("stream-stream-outer-join", "left stream outerJoin right stream (timeDifferenceMs, graceMs).",
        List.of("timeDifferenceMs", "graceMs"),
        (builder, p) -> left(builder).outerJoin(builder.stream(RIGHT, Consumed.with(S, S)), JOINER,
                JoinWindows.ofTimeDifferenceAndGrace(ms(p, "timeDifferenceMs"), ms(p, "graceMs")), StreamJoined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));

    // stream-stream-join-asymmetric / -left- / -outer-: as above with JoinWindows.ofTimeDifferenceAndGrace(
    // 0, graceMs).before(beforeMs).after(afterMs): a right record joins a left one at t when its timestamp
    // is in [t - beforeMs, t + afterMs]. Params: beforeMs, afterMs, graceMs.
    registerJoin("stream-stream-join-asymmetric", "left stream join right stream (beforeMs, afterMs, graceMs).",
        List.of("beforeMs", "afterMs", "graceMs"),
        (builder, p) -> left(builder).join(builder.stream(RIGHT, Consumed.with(S, S)), JOINER, asymmetric(p),
                StreamJoined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));
    registerJoin("stream-stream-left-join-asymmetric", "left stream leftJoin right stream (beforeMs, afterMs, graceMs).",
        List.of("beforeMs", "afterMs", "graceMs"),
        (builder, p) -> left(builder).leftJoin(builder.stream(RIGHT, Consumed.with(S, S)), JOINER, asymmetric(p),
                StreamJoined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));
    registerJoin("stream-stream-outer-join-asymmetric", "left stream outerJoin right stream (beforeMs, afterMs, graceMs).",
        List.of("beforeMs", "afterMs", "graceMs"),
        (builder, p) -> left(builder).outerJoin(builder.stream(RIGHT, Consumed.with(S, S)), JOINER, asymmetric(p),
                StreamJoined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));

    // table-table-join / -left-join / -outer-join: two tables joined on their key; an update on
    // either side emits the joined value, a delete a tombstone (null value). No params.
    registerJoin("table-table-join", "left table join right table (inner).", List.of(),
        (builder, p) -> table(builder, LEFT, "left-table").join(table(builder, RIGHT, "right-table"), JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));
    registerJoin("table-table-left-join", "left table leftJoin right table.", List.of(),
        (builder, p) -> table(builder, LEFT, "left-table").leftJoin(table(builder, RIGHT, "right-table"), JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));
    registerJoin("table-table-outer-join", "left table outerJoin right table.", List.of(),
        (builder, p) -> table(builder, LEFT, "left-table").outerJoin(table(builder, RIGHT, "right-table"), JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));

    // table-table-filtered-join / -left-join / -outer-join: as table-table-join, with the left table
    // filtered (values l + n with n % 3 != 0) and the right one filtered (n % 4 != 0) and
    // upper-cased (R + n): a filtered-out update deletes, through the join's sendOldValues. No params.
    registerJoin("table-table-filtered-join", "left table filtered join right table filtered, mapped (inner).", List.of(),
        (builder, p) -> filteredLeft(builder).join(filteredRight(builder), JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));
    registerJoin("table-table-filtered-left-join", "left table filtered leftJoin right table filtered, mapped.", List.of(),
        (builder, p) -> filteredLeft(builder).leftJoin(filteredRight(builder), JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));
    registerJoin("table-table-filtered-outer-join", "left table filtered outerJoin right table filtered, mapped.", List.of(),
        (builder, p) -> filteredLeft(builder).outerJoin(filteredRight(builder), JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));

    // stream-aggregate-table-join / -left-join: the stream `left` joined with the table of the
    // largest value per key of the stream `right` (groupByKey().reduce(max by number)). No params.
    registerJoin("stream-aggregate-table-join", "left stream join (right stream reduce max) table (inner).", List.of(),
        (builder, p) -> left(builder).join(maxTable(builder, RIGHT), JOINER, Joined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));
    registerJoin("stream-aggregate-table-left-join", "left stream leftJoin (right stream reduce max) table.", List.of(),
        (builder, p) -> left(builder).leftJoin(maxTable(builder, RIGHT), JOINER, Joined.with(S, S, S))
            .to(OUTPUT, Produced.with(S, S)));

    // table-aggregate-table-outer-join: the table `left` outerJoin the table of the largest value per
    // key of the stream `right`; aggregate-table-left-join: that aggregate table leftJoin the table
    // `left` (value r + "+" + l). No params.
    registerJoin("table-aggregate-table-outer-join", "left table outerJoin (right stream reduce max) table.", List.of(),
        (builder, p) -> table(builder, LEFT, "left-table").outerJoin(maxTable(builder, RIGHT), JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));
    registerJoin("aggregate-table-left-join", "(right stream reduce max) table leftJoin left table.", List.of(),
        (builder, p) -> maxTable(builder, RIGHT).leftJoin(table(builder, LEFT, "left-table"), JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));

    // fk-join / fk-left-join: the table `left` joined with the table `right` on the key of `right` its
    // value names (Topologies.foreignKey), KTable.join(other, foreignKeyExtractor, joiner) (KIP-213):
    // subscription and response topics, a stale response dropped. fk-filtered-join / -left-join: the
    // same with the left table filtered (n % 3 != 0) and the right one filtered (n % 4 != 0) and
    // upper-cased, as table-table-filtered-join. No params.
    registerJoin("fk-join", "left table join right table on the foreign key its value names (inner).", List.of(),
        (builder, p) -> table(builder, LEFT, "left-table")
            .join(table(builder, RIGHT, "right-table"), (Function<String, String>) Topologies::foreignKey, JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));
    registerJoin("fk-left-join", "left table leftJoin right table on the foreign key its value names.", List.of(),
        (builder, p) -> table(builder, LEFT, "left-table")
            .leftJoin(table(builder, RIGHT, "right-table"), (Function<String, String>) Topologies::foreignKey, JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));
    registerJoin("fk-filtered-join", "left table filtered join right table filtered, mapped, on the foreign key (inner).", List.of(),
        (builder, p) -> filteredLeft(builder)
            .join(filteredRight(builder), (Function<String, String>) Topologies::foreignKey, JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));
    // stream-global-table-join / -left-join: the stream `left` joined with the global table of `right`
    // on the key its value names (Topologies.foreignKey), KStream.join(globalTable, keyMapper, joiner):
    // the left join joins a record without a key too (KIP-962). No params.
    registerJoin("stream-global-table-join", "left stream join right global table on the key its value names (inner).", List.of(),
        (builder, p) -> left(builder).join(builder.globalTable(RIGHT, Consumed.with(S, S),
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("right-global").withKeySerde(S).withValueSerde(S)),
                (k, v) -> v == null ? null : foreignKey(v), JOINER)
            .to(OUTPUT, Produced.with(S, S)));
    registerJoin("stream-global-table-left-join", "left stream leftJoin right global table on the key its value names.", List.of(),
        (builder, p) -> left(builder).leftJoin(builder.globalTable(RIGHT, Consumed.with(S, S),
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("right-global").withKeySerde(S).withValueSerde(S)),
                (k, v) -> v == null ? null : foreignKey(v), JOINER)
            .to(OUTPUT, Produced.with(S, S)));
    registerJoin("fk-filtered-left-join", "left table filtered leftJoin right table filtered, mapped, on the foreign key.", List.of(),
        (builder, p) -> filteredLeft(builder)
            .leftJoin(filteredRight(builder), (Function<String, String>) Topologies::foreignKey, JOINER)
            .toStream().to(OUTPUT, Produced.with(S, S)));
  }
}
