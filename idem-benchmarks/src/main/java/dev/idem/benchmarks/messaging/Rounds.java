package dev.idem.benchmarks.messaging;

import java.util.List;
import java.util.stream.Collectors;

/** A contender's rates, one per round, as the messaging benchmarks print them. */
final class Rounds {
  private Rounds() {}

  /** The median of {@code rates} (the upper one of an even count). */
  static double median(List<Double> rates) {
    double[] v = rates.stream().mapToDouble(Double::doubleValue).sorted().toArray();
    return v[v.length / 2];
  }

  /** {@code rates} in round order, whole numbers with thousands separators: "5,177, 5,540". */
  static String each(List<Double> rates) {
    return rates.stream().map(x -> String.format("%,.0f", x)).collect(Collectors.joining(", "));
  }
}
