package dev.idem.spring.boot;

import java.util.Map;

/**
 * What one run of a {@link ScheduledCheck} found.
 *
 * @param counts per finding kind (a meter tag value, e.g. {@code duplicate_effect}), how many;
 *     every kind the check knows, zeros included, so its gauges read 0 when all is well
 * @param examples what the endpoint shows of them (JSON-friendly: strings, numbers, lists, maps)
 */
record CheckResult(Map<String, Long> counts, Map<String, Object> examples) {
  CheckResult {
    counts = Map.copyOf(counts);
    examples = Map.copyOf(examples);
  }
}
