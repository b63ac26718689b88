package dev.idem.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.spi.ToolProvider;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * No module of idem has a package cycle: for each module, the JDK's jdeps reads the package
 * dependencies of its compiled classes, and no two packages may depend on each other, directly or
 * around a loop. idem-examples depends on every published module, so their classes are on this
 * test's class path (the reactor's target/classes, or their jars); idem-examples' own are checked
 * too. Not idem-benchmarks (a JMH harness, built after this module, never published), nor
 * idem-bom (no classes), nor the release build's bundle check (.ci/bundle-check, built last under
 * -Prelease, a build step, never published).
 */
class PackageCyclesTest {
  private static final Set<String> NOT_HERE = Set.of("idem-bom", "idem-benchmarks", ".ci/bundle-check");
  private static final Pattern MODULE = Pattern.compile("<module>([^<]+)</module>");
  private static final Pattern EDGE = Pattern.compile("^\\s+(\\S+)\\s+->\\s+(\\S+)\\s");

  @Test
  void noModuleHasAPackageCycle() throws Exception {
    Path root = Path.of("").toAbsolutePath().getParent();
    Map<String, Path> classes = modulesOnTheClassPath(root);
    classes.put("idem-examples", root.resolve("idem-examples/target/classes"));
    Set<String> built = modulesOfTheBuild(root);
    built.removeAll(NOT_HERE);
    assertThat(classes.keySet()).as("every module's classes were found").containsAll(built);

    Map<String, List<String>> cycles = new TreeMap<>();
    for (Map.Entry<String, Path> module : classes.entrySet()) {
      Map<String, Set<String>> graph = packageGraph(module.getValue());
      assertThat(graph).as(module.getKey() + ": jdeps read its packages").isNotEmpty();
      System.out.println(module.getKey() + ": " + graph.size() + " packages, from " + module.getValue());
      List<String> found = cyclesIn(graph);
      if (!found.isEmpty()) {
        cycles.put(module.getKey(), found);
      }
    }
    assertThat(cycles).as("package cycles, per module (each: the packages in it, and their dependencies among them)").isEmpty();
  }

  @Test
  void aCycleIsNamedWithItsPackages() {
    Map<String, Set<String>> graph = new TreeMap<>(Map.of(
        "dev.idem.a", Set.of("dev.idem.b"), "dev.idem.b", Set.of("dev.idem.c"), "dev.idem.c", Set.of("dev.idem.a"),
        "dev.idem.d", Set.of("dev.idem.a")));
    assertThat(cyclesIn(graph)).containsExactly(
        "dev.idem.a -> [dev.idem.b]; dev.idem.b -> [dev.idem.c]; dev.idem.c -> [dev.idem.a]");
    assertThat(cyclesIn(Map.of("dev.idem.a", Set.of("dev.idem.b"), "dev.idem.b", Set.of()))).isEmpty();
  }

  /** The modules the root pom builds. */
  private static Set<String> modulesOfTheBuild(Path root) throws IOException {
    Matcher m = MODULE.matcher(Files.readString(root.resolve("pom.xml")));
    Set<String> modules = new TreeSet<>();
    while (m.find()) {
      modules.add(m.group(1).trim());
    }
    return modules;
  }

  /** idem's modules on this class path: their classes directory in the reactor, or their jar. */
  private static Map<String, Path> modulesOnTheClassPath(Path root) {
    Map<String, Path> modules = new TreeMap<>();
    for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
      Path p = Path.of(entry).toAbsolutePath();
      String module = null;
      if (p.startsWith(root) && !p.startsWith(root.resolve("idem-examples"))) {
        module = root.relativize(p).getName(0).toString(); // <module>/target/classes or its jar
      } else if (p.getFileName().toString().startsWith("idem-") && p.toString().endsWith(".jar")
          && p.getParent().getParent().getParent().endsWith(Path.of("dev", "idem"))) {
        module = p.getParent().getParent().getFileName().toString(); // ~/.m2/.../dev/idem/<module>/<version>/
      }
      if (module != null && (p.endsWith(Path.of("target", "classes")) || p.toString().endsWith(".jar"))) {
        modules.put(module, p);
      }
    }
    return modules;
  }

  /**
   * Each package of the module's classes to the module's other packages it uses, as jdeps reads
   * them. The classes are copied without module-info.class first: jdeps would otherwise resolve
   * the module's requirements, which are not all at hand.
   */
  static Map<String, Set<String>> packageGraph(Path classesOrJar) throws IOException {
    Path copy = Files.createTempDirectory("idem-jdeps");
    Set<String> packages = new TreeSet<>();
    try (FileSystem jar = Files.isDirectory(classesOrJar) ? null : FileSystems.newFileSystem(classesOrJar)) {
      Path from = jar == null ? classesOrJar : jar.getPath("/");
      List<Path> files;
      try (Stream<Path> walk = Files.walk(from)) {
        files = walk.filter(f -> f.toString().endsWith(".class") && !f.getFileName().toString().equals("module-info.class")
            && !from.relativize(f).toString().startsWith("META-INF")).collect(Collectors.toList());
      }
      for (Path f : files) {
        Path relative = copy.resolve(from.relativize(f).toString());
        Files.createDirectories(relative.getParent());
        Files.copy(f, relative);
        packages.add(from.relativize(f.getParent()).toString().replace(from.getFileSystem().getSeparator(), "."));
      }
    }
    StringWriter out = new StringWriter();
    int exit = ToolProvider.findFirst("jdeps").orElseThrow()
        .run(new PrintWriter(out), new PrintWriter(out), "-verbose:package", copy.toString());
    try (Stream<Path> walk = Files.walk(copy)) {
      for (Path f : walk.sorted(Comparator.reverseOrder()).collect(Collectors.toList())) {
        Files.delete(f);
      }
    }
    assertThat(exit).as(classesOrJar + ": " + out).isZero();
    Map<String, Set<String>> graph = new TreeMap<>();
    for (String line : out.toString().split("\n")) {
      Matcher m = EDGE.matcher(line);
      if (m.find() && packages.contains(m.group(1))) {
        Set<String> uses = graph.computeIfAbsent(m.group(1), k -> new TreeSet<>());
        if (packages.contains(m.group(2)) && !m.group(1).equals(m.group(2))) {
          uses.add(m.group(2));
        }
      }
    }
    return graph;
  }

  /**
   * The cycles of {@code graph}: its strongly connected components of more than one package
   * (Tarjan's algorithm), each written as its packages and the edges among them.
   */
  static List<String> cyclesIn(Map<String, Set<String>> graph) {
    Map<String, Integer> index = new HashMap<>();
    Map<String, Integer> low = new HashMap<>();
    List<String> stack = new ArrayList<>();
    List<String> cycles = new ArrayList<>();
    for (String p : graph.keySet()) {
      if (!index.containsKey(p)) {
        connect(p, graph, index, low, stack, cycles);
      }
    }
    return cycles;
  }

  private static void connect(String p, Map<String, Set<String>> graph, Map<String, Integer> index,
      Map<String, Integer> low, List<String> stack, List<String> cycles) {
    index.put(p, index.size());
    low.put(p, index.get(p));
    stack.add(p);
    for (String q : graph.getOrDefault(p, Set.of())) {
      if (!index.containsKey(q)) {
        connect(q, graph, index, low, stack, cycles);
        low.put(p, Math.min(low.get(p), low.get(q)));
      } else if (stack.contains(q)) {
        low.put(p, Math.min(low.get(p), index.get(q)));
      }
    }
    if (low.get(p).equals(index.get(p))) {
      List<String> component = new ArrayList<>(stack.subList(stack.indexOf(p), stack.size()));
      stack.subList(stack.indexOf(p), stack.size()).clear();
      if (component.size() > 1) {
        Set<String> members = new TreeSet<>(component);
        cycles.add(members.stream()
            .map(a -> a + " -> " + graph.getOrDefault(a, Set.of()).stream().filter(members::contains).collect(Collectors.toList()))
            .collect(Collectors.joining("; ")));
      }
    }
  }
}
