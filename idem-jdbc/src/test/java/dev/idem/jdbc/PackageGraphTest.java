package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.File;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.spi.ToolProvider;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The packages of idem-jdbc, as jdeps reads them from the compiled classes: no cycle among them,
 * the tools never depend on one another or on the entry point, and the module exports only the API.
 */
class PackageGraphTest {
  private static final Pattern EDGE = Pattern.compile("^\\s+(dev\\.idem\\.jdbc\\S*)\\s+->\\s+(dev\\.idem\\.jdbc\\S*)\\s");
  private static final Set<String> TOOLS = Set.of("dev.idem.jdbc.executor", "dev.idem.jdbc.inbox", "dev.idem.jdbc.outbox",
      "dev.idem.jdbc.transition", "dev.idem.jdbc.lease", "dev.idem.jdbc.sequence", "dev.idem.jdbc.nature",
      "dev.idem.jdbc.notify");

  static Map<String, Set<String>> graph() throws Exception {
    Path classes = Path.of(Idem.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    String modulePath = Stream.of(System.getProperty("jdk.module.path", ""), System.getProperty("java.class.path", ""))
        .flatMap(p -> Stream.of(p.split(File.pathSeparator)))
        .filter(PackageGraphTest::requiredByTheModule)
        .distinct()
        .collect(Collectors.joining(File.pathSeparator));
    StringWriter out = new StringWriter();
    int exit = ToolProvider.findFirst("jdeps").orElseThrow()
        .run(new PrintWriter(out), new PrintWriter(out), "--multi-release", "17", "-verbose:package",
            "--module-path", modulePath, classes.toString());
    assertThat(exit).as(out.toString()).isZero();
    Map<String, Set<String>> graph = new HashMap<>();
    for (String line : out.toString().split("\n")) {
      Matcher m = EDGE.matcher(line);
      if (m.find() && !m.group(1).equals(m.group(2))) {
        graph.computeIfAbsent(m.group(1), k -> new TreeSet<>()).add(m.group(2));
      }
    }
    assertThat(graph).as("jdeps found the packages: " + out).containsKey("dev.idem.jdbc");
    return graph;
  }

  /** What idem-jdbc's module-info requires, transitively: the test class path holds much more. */
  private static boolean requiredByTheModule(String entry) {
    String name = Path.of(entry).getFileName().toString();
    return Stream.of("jooq-", "postgresql-", "flyway-core-", "slf4j-api-", "r2dbc-spi-", "reactive-streams-", "idem-core")
        .anyMatch(name::startsWith) || entry.replace(File.separatorChar, '/').endsWith("idem-core/target/classes");
  }

  @Test
  void thePackagesFormNoCycle() throws Exception {
    Map<String, Set<String>> graph = graph();
    List<String> cycles = new ArrayList<>();
    for (String start : graph.keySet()) {
      findCycles(graph, List.of(start), cycles);
    }
    assertThat(cycles).as(graph.toString()).isEmpty();
  }

  @Test
  void toolsDependOnNeitherTheEntryPointNorEachOther() throws Exception {
    Map<String, Set<String>> graph = graph();
    for (String tool : TOOLS) {
      Set<String> uses = new HashSet<>(graph.getOrDefault(tool, Set.of()));
      assertThat(uses).as(tool).doesNotContain("dev.idem.jdbc");
      uses.retainAll(TOOLS);
      assertThat(uses).as(tool + " uses another tool").isEmpty();
    }
  }

  @Test
  void theModuleExportsOnlyTheApi() {
    Set<String> exported = Idem.class.getModule().getDescriptor() == null ? Set.of()
        : Idem.class.getModule().getDescriptor().exports().stream().map(e -> e.source()).collect(Collectors.toSet());
    if (!exported.isEmpty()) { // on the module path
      assertThat(exported).doesNotContain("dev.idem.jdbc.internal", "dev.idem.jdbc.internal.claim");
    }
  }

  private static void findCycles(Map<String, Set<String>> graph, List<String> path, List<String> cycles) {
    for (String next : graph.getOrDefault(path.get(path.size() - 1), Set.of())) {
      int at = path.indexOf(next);
      if (at >= 0) {
        cycles.add(String.join(" -> ", path.subList(at, path.size())) + " -> " + next);
      } else if (path.size() < 20) {
        List<String> longer = new ArrayList<>(path);
        longer.add(next);
        findCycles(graph, longer, cycles);
      }
    }
  }
}
