package dev.idem.http;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * JSON in one canonical text: object members sorted by name, no whitespace, strings escaped the
 * one way Jackson writes them, and every number by its value (so {@code 40}, {@code 40.0} and
 * {@code 4e1} read alike: JSON does not tell them apart, and neither do honest retries). A
 * document with a duplicate member name is not JSON this class accepts: which of the two a
 * handler reads depends on its parser, so no canonical form can stand for it.
 */
final class CanonicalJson {
  private static final ObjectMapper MAPPER = JsonMapper.builder()
      .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
      .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
      .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
      .build();
  private static final JsonFactory FACTORY = MAPPER.getFactory();

  private CanonicalJson() {}

  /** The document in {@code body}, or null if it is not one JSON document. */
  static JsonNode parse(byte[] body) {
    try (JsonParser parser = FACTORY.createParser(body)) {
      JsonNode node = MAPPER.readTree(parser);
      return node == null || node.isMissingNode() ? null : node;
    } catch (IOException e) {
      return null;
    }
  }

  /** The canonical text of {@code node}. */
  static String text(JsonNode node) {
    StringWriter out = new StringWriter();
    try (JsonGenerator g = FACTORY.createGenerator(out)) {
      write(g, node);
    } catch (IOException e) {
      throw new IllegalStateException("writing to a string cannot fail", e);
    }
    return out.toString();
  }

  private static void write(JsonGenerator g, JsonNode node) throws IOException {
    if (node.isObject()) {
      List<String> names = new ArrayList<>();
      node.fieldNames().forEachRemaining(names::add);
      Collections.sort(names);
      g.writeStartObject();
      for (String name : names) {
        g.writeFieldName(name);
        write(g, node.get(name));
      }
      g.writeEndObject();
    } else if (node.isArray()) {
      g.writeStartArray();
      for (JsonNode item : node) {
        write(g, item);
      }
      g.writeEndArray();
    } else if (node.isNumber()) {
      BigDecimal value = node.decimalValue();
      // stripTrailingZeros gives one representation per value; 0.0 keeps a scale in old JDKs.
      g.writeNumber(value.signum() == 0 ? "0" : value.stripTrailingZeros().toString());
    } else {
      g.writeTree(node);
    }
  }
}
