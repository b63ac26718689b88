package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The operator's view and reconciliation, as jdeps reads them: neither depends on a tool's package
 * nor on the entry point (only on the shared internal and claim code), and reconciliation reuses
 * the operator's view rather than the other way round.
 */
class OpsPackageGraphTest {
  private static final Set<String> TOOLS = Set.of("dev.idem.jdbc.executor", "dev.idem.jdbc.inbox", "dev.idem.jdbc.outbox",
      "dev.idem.jdbc.transition", "dev.idem.jdbc.lease", "dev.idem.jdbc.sequence", "dev.idem.jdbc");

  @Test
  void opsAndReconcileUseNoToolAndNotTheEntryPoint() throws Exception {
    Map<String, Set<String>> graph = PackageGraphTest.graph();
    assertThat(graph.getOrDefault("dev.idem.jdbc.ops", Set.of())).as("ops").doesNotContainAnyElementsOf(TOOLS)
        .doesNotContain("dev.idem.jdbc.reconcile");
    assertThat(graph.getOrDefault("dev.idem.jdbc.reconcile", Set.of())).as("reconcile").doesNotContainAnyElementsOf(TOOLS);
    assertThat(graph.get("dev.idem.jdbc")).contains("dev.idem.jdbc.ops", "dev.idem.jdbc.reconcile");
  }
}
