package dev.skein.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Iterator;
import java.util.List;

/** A topology's params: exactly the names it declares, each a JSON integer (milliseconds). */
final class Params {
  private final JsonNode node;

  Params(String topology, JsonNode node, List<String> declared) {
    this.node = node == null || node.isNull() ? com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode() : node;
    if (!this.node.isObject()) throw new OracleException("params of " + topology + " must be an object");
    for (Iterator<String> names = this.node.fieldNames(); names.hasNext(); ) {
      String name = names.next();
      if (!declared.contains(name)) {
        throw new OracleException("unknown param \"" + name + "\" for " + topology + "; it takes: " + describe(declared));
      }
    }
    for (String name : declared) {
      JsonNode value = this.node.get(name);
      if (value == null || !value.isIntegralNumber() || !value.canConvertToLong()) {
        throw new OracleException(topology + " needs the integer param \"" + name + "\"; it takes: " + describe(declared));
      }
    }
  }

  private static String describe(List<String> declared) {
    return declared.isEmpty() ? "no params" : String.join(", ", declared);
  }

  long millis(String name) {
    return node.get(name).asLong();
  }
}
