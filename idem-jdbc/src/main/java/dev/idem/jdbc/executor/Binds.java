package dev.idem.jdbc.executor;

import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import java.util.HexFormat;
import java.util.function.Function;

/** The values one call binds to the executor's named parameters. */
final class Binds implements Function<String, Object> {
  final IdempotencyKey key;
  final byte[] fingerprint;
  String callKey;
  byte[] result;
  long fence;

  Binds(IdempotencyKey key, Fingerprint fingerprint) {
    this.key = key;
    this.fingerprint = HexFormat.of().parseHex(fingerprint.hex());
  }

  Binds fence(long fence) {
    this.fence = fence;
    return this;
  }

  Binds result(byte[] result) {
    this.result = result;
    return this;
  }

  @Override
  public Object apply(String name) {
    return switch (name) {
      case "scope" -> key.scope();
      case "key" -> key.value();
      case "fingerprint" -> fingerprint;
      case "call_key" -> callKey;
      case "result" -> result;
      case "fence" -> fence;
      default -> throw new IllegalStateException("no value for parameter " + name);
    };
  }
}
