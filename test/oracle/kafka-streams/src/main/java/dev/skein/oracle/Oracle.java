package dev.skein.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Stream;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Skein's Kafka Streams oracle: runs a named topology (see {@link Topologies}) in
 * {@code TopologyTestDriver} on the records given as JSON on stdin and writes every output record
 * as one JSON line on stdout.
 *
 * <p>stdin: one scenario, or a JSON array of scenarios (each run in its own fresh driver):
 * <pre>
 * { "topology": "tumbling-count", "params": { "sizeMs": 1000, "graceMs": 0 },
 *   "inputs": [ { "topic": "input", "key": "a", "value": "x", "timestamp": 5, "headers": { "h": "v" } } ],
 *   "advanceWallClock": [ { "afterInput": 0, "millis": 1000 } ] }
 * </pre>
 * Keys and values are JSON strings or integers as the topology's serdes say ({@code null} for a
 * null key or a tombstone). {@code afterInput} is the index of the input after which wall-clock
 * time advances ({@code -1}: before the first); the driver's wall clock starts at 0.
 *
 * <p>stdout: one line per output record, in the order the driver produced them (after each input,
 * every output topic is drained in the topology's order): {@code { "topic", "key", "value",
 * "timestamp" }}, plus {@code "scenario": i} when stdin was an array.
 *
 * <p>Configuration: in-memory stores, record cache off ({@code statestore.cache.max.bytes=0}), so
 * every update is forwarded. Exit status 0 on success, 2 with the reason on stderr when a scenario
 * cannot run (bad JSON, unknown topology or param, a Kafka Streams exception). {@code --list}
 * prints the registered topologies.
 */
public final class Oracle {
  private Oracle() {}

  private static final ObjectMapper MAPPER = new ObjectMapper();

  public static void main(String[] args) {
    if (args.length == 1 && args[0].equals("--list")) {
      for (Topologies.Definition d : Topologies.all()) {
        System.out.println(d.name() + " (" + String.join(", ", d.params()) + "): " + d.doc());
      }
      return;
    }
    PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
        false, StandardCharsets.UTF_8);
    int index = -1;
    try {
      JsonNode document = MAPPER.readTree(System.in);
      if (document == null || document.isMissingNode()) throw new OracleException("stdin is empty: expected a scenario or an array of scenarios");
      boolean batch = document.isArray();
      List<JsonNode> scenarios = new ArrayList<>();
      if (batch) document.forEach(scenarios::add); else scenarios.add(document);
      for (index = 0; index < scenarios.size(); index++) {
        run(scenarios.get(index), batch ? index : null, out);
      }
      out.flush();
    } catch (IOException e) {
      out.flush();
      System.err.println("oracle: stdin is not valid JSON: " + e.getMessage());
      System.exit(2);
    } catch (RuntimeException e) {
      out.flush();
      String where = index >= 0 ? "scenario " + index + ": " : "";
      String what = e instanceof OracleException ? e.getMessage() : e.getClass().getName() + ": " + e.getMessage();
      System.err.println("oracle: " + where + what);
      if (!(e instanceof OracleException)) e.printStackTrace(System.err);
      System.exit(2);
    }
  }

  private static void run(JsonNode scenario, Integer index, PrintStream out) throws IOException {
    if (!scenario.isObject()) throw new OracleException("a scenario must be an object");
    JsonNode topologyName = scenario.get("topology");
    if (topologyName == null || !topologyName.isTextual()) throw new OracleException("\"topology\" (a name) is missing");
    Topologies.Definition definition = Topologies.get(topologyName.asText());
    Params params = new Params(definition.name(), scenario.get("params"), definition.params());
    StreamsBuilder builder = new StreamsBuilder();
    definition.build().accept(builder, params);

    JsonNode inputs = scenario.get("inputs");
    if (inputs == null || !inputs.isArray()) throw new OracleException("\"inputs\" (an array of records) is missing");
    Map<Integer, List<Long>> advances = wallClockAdvances(scenario.get("advanceWallClock"), inputs.size());

    Path stateDir = Files.createTempDirectory("skein-oracle-");
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, "skein-oracle");
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "oracle.invalid:9092");
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
    props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
    props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG, BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class);
    props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props, Instant.EPOCH)) {
      Map<String, Topologies.TopicSpec> inputSpecs = new HashMap<>();
      Map<String, TestInputTopic<byte[], byte[]>> inputTopics = new HashMap<>();
      for (Topologies.TopicSpec spec : definition.inputs()) {
        inputSpecs.put(spec.name(), spec);
        inputTopics.put(spec.name(), driver.createInputTopic(spec.name(), new ByteArraySerializer(), new ByteArraySerializer()));
      }
      Map<Topologies.TopicSpec, TestOutputTopic<byte[], byte[]>> outputTopics = new LinkedHashMap<>();
      for (Topologies.TopicSpec spec : definition.outputs()) {
        outputTopics.put(spec, driver.createOutputTopic(spec.name(), new ByteArrayDeserializer(), new ByteArrayDeserializer()));
      }
      advance(driver, advances.get(-1), outputTopics, index, out);
      for (int i = 0; i < inputs.size(); i++) {
        JsonNode record = inputs.get(i);
        String where = "inputs[" + i + "]";
        if (!record.isObject()) throw new OracleException(where + " must be an object");
        JsonNode topic = record.get("topic");
        if (topic == null || !topic.isTextual() || !inputSpecs.containsKey(topic.asText())) {
          throw new OracleException(where + ".topic must be one of " + inputSpecs.keySet() + " for " + definition.name());
        }
        Topologies.TopicSpec spec = inputSpecs.get(topic.asText());
        JsonNode timestamp = record.get("timestamp");
        if (timestamp == null || !timestamp.isIntegralNumber() || !timestamp.canConvertToLong()) {
          throw new OracleException(where + ".timestamp (an integer, milliseconds) is missing");
        }
        RecordHeaders headers = new RecordHeaders();
        JsonNode headerNode = record.get("headers");
        if (headerNode != null && !headerNode.isNull()) {
          if (!headerNode.isObject()) throw new OracleException(where + ".headers must be an object of strings");
          for (Iterator<Map.Entry<String, JsonNode>> it = headerNode.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> h = it.next();
            if (!h.getValue().isTextual() && !h.getValue().isNull()) throw new OracleException(where + ".headers." + h.getKey() + " must be a string or null");
            headers.add(h.getKey(), h.getValue().isNull() ? null : h.getValue().asText().getBytes(StandardCharsets.UTF_8));
          }
        }
        byte[] key = encode(record.get("key"), spec.key(), where + ".key");
        byte[] value = encode(record.get("value"), spec.value(), where + ".value");
        inputTopics.get(spec.name()).pipeInput(new TestRecord<>(key, value, headers, timestamp.asLong()));
        drain(outputTopics, index, out);
        advance(driver, advances.get(i), outputTopics, index, out);
      }
    } finally {
      deleteRecursively(stateDir);
    }
  }

  private static Map<Integer, List<Long>> wallClockAdvances(JsonNode node, int inputCount) {
    Map<Integer, List<Long>> advances = new HashMap<>();
    if (node == null || node.isNull()) return advances;
    if (!node.isArray()) throw new OracleException("\"advanceWallClock\" must be an array of { afterInput, millis }");
    for (int i = 0; i < node.size(); i++) {
      JsonNode a = node.get(i);
      JsonNode after = a.get("afterInput");
      JsonNode millis = a.get("millis");
      if (after == null || !after.isInt() || after.asInt() < -1 || after.asInt() >= inputCount
          || millis == null || !millis.isIntegralNumber() || millis.asLong() < 0) {
        throw new OracleException("advanceWallClock[" + i + "] must be { afterInput: -1.." + (inputCount - 1) + ", millis: >= 0 }");
      }
      advances.computeIfAbsent(after.asInt(), k -> new ArrayList<>()).add(millis.asLong());
    }
    return advances;
  }

  private static void advance(TopologyTestDriver driver, List<Long> millis,
      Map<Topologies.TopicSpec, TestOutputTopic<byte[], byte[]>> outputs, Integer index, PrintStream out) throws IOException {
    if (millis == null) return;
    for (long m : millis) {
      driver.advanceWallClockTime(Duration.ofMillis(m));
      drain(outputs, index, out);
    }
  }

  private static void drain(Map<Topologies.TopicSpec, TestOutputTopic<byte[], byte[]>> outputs, Integer index,
      PrintStream out) throws IOException {
    for (Map.Entry<Topologies.TopicSpec, TestOutputTopic<byte[], byte[]>> entry : outputs.entrySet()) {
      Topologies.TopicSpec spec = entry.getKey();
      TestOutputTopic<byte[], byte[]> topic = entry.getValue();
      while (!topic.isEmpty()) {
        TestRecord<byte[], byte[]> record = topic.readRecord();
        ObjectNode line = MAPPER.createObjectNode();
        if (index != null) line.put("scenario", index);
        line.put("topic", spec.name());
        line.set("key", decode(record.key(), spec.key()));
        line.set("value", decode(record.value(), spec.value()));
        line.put("timestamp", record.timestamp());
        out.println(MAPPER.writeValueAsString(line));
      }
    }
  }

  private static byte[] encode(JsonNode node, Topologies.Kind kind, String where) {
    if (node == null || node.isNull()) return null;
    switch (kind) {
      case STRING:
        if (!node.isTextual()) throw new OracleException(where + " must be a string or null (String serde)");
        return node.asText().getBytes(StandardCharsets.UTF_8);
      case LONG:
        if (!node.isIntegralNumber() || !node.canConvertToLong()) throw new OracleException(where + " must be an integer or null (Long serde)");
        return new LongSerializer().serialize("", node.asLong());
      default:
        throw new IllegalStateException(kind.toString());
    }
  }

  private static JsonNode decode(byte[] bytes, Topologies.Kind kind) {
    if (bytes == null) return MAPPER.nullNode();
    switch (kind) {
      case STRING:
        return MAPPER.getNodeFactory().textNode(new String(bytes, StandardCharsets.UTF_8));
      case LONG:
        return MAPPER.getNodeFactory().numberNode(new LongDeserializer().deserialize("", bytes));
      default:
        throw new IllegalStateException(kind.toString());
    }
  }

  private static void deleteRecursively(Path dir) throws IOException {
    if (!Files.exists(dir)) return;
    try (Stream<Path> paths = Files.walk(dir)) {
      for (Path p : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) Files.deleteIfExists(p);
    }
  }
}
