import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.module.ModuleDescriptor;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.jar.JarFile;
import java.util.jar.Manifest;
import java.util.spi.ToolProvider;
import java.util.stream.Collectors;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/**
 * idem's API baseline: for every published module, api/ARTIFACT.jar (the class files of what a user
 * can call, the "old version" the build's japicmp compares the module's jar with) and
 * api/ARTIFACT.api (the same surface as text, what a reviewer reads in a diff).
 *
 * <p>The surface of a module's jar: every public (or protected nested) class, not synthetic, in a
 * package with no {@code internal} segment in its name, plus module-info.class or the manifest's
 * Automatic-Module-Name. A named module must export (to everyone) exactly those packages: a public
 * class in a package it does not export, or an unqualified export of an {@code internal} package, is
 * an error, so that "non-internal" (japicmp's filter) and "exported" never disagree. The listing is
 * {@code javap -protected -constants} of each class, members sorted (their order in the source is
 * no API), classes sorted by name, and the module declaration without versions.
 *
 * <pre>
 * java ApiBaseline.java write ROOT                      every published module's target jar -> ROOT/api/
 * java ApiBaseline.java check ARTIFACT PACKAGING JAR API_DIR OUT_DIR
 *                                                       one module, in its build (mvn verify)
 * java ApiBaseline.java check-files ROOT                api/*.api matches api/*.jar, no build needed
 * java ApiBaseline.java modules ROOT                    the published modules, comma-separated
 * </pre>
 *
 * <p>Published modules are the root pom's modules that are not pom-packaged and do not set
 * maven.deploy.skip (as .ci/bundle-check/CheckBundle.java reads them). Run through .ci/api-baseline.
 */
public class ApiBaseline {
  static final String ACCEPT = "if deliberate, run .ci/api-baseline and commit api/";
  /** The one timestamp of every entry of an API jar, so that the same classes make the same jar. */
  static final LocalDateTime ENTRY_TIME = LocalDateTime.of(2000, 1, 1, 0, 0);
  static final int ACC_PUBLIC = 0x0001;
  static final int ACC_SYNTHETIC = 0x1000;
  /** At most this many lines of difference are printed; the files in OUT_DIR have the rest. */
  static final int MAX_DIFF_LINES = 200;

  public static void main(String[] args) throws Exception {
    try {
      System.exit(run(args));
    } catch (IllegalStateException e) {
      System.out.println("[api] ERROR " + e.getMessage());
      System.exit(1);
    }
  }

  static int run(String[] args) throws Exception {
    String mode = args.length == 0 ? "" : args[0];
    int status;
    if (mode.equals("write") && args.length == 2) {
      status = write(Path.of(args[1]));
    } else if (mode.equals("check") && args.length == 6) {
      status = check(args[1], args[2], Path.of(args[3]), Path.of(args[4]), Path.of(args[5]));
    } else if (mode.equals("check-files") && args.length == 2) {
      status = checkFiles(Path.of(args[1]));
    } else if (mode.equals("modules") && args.length == 2) {
      System.out.println(String.join(",", published(Path.of(args[1]))));
      status = 0;
    } else {
      System.err.println("usage: ApiBaseline write ROOT | check ARTIFACT PACKAGING JAR API_DIR OUT_DIR"
          + " | check-files ROOT | modules ROOT");
      status = 2;
    }
    return status;
  }

  /** Regenerates ROOT/api/ from each published module's built jar, removing files of no module. */
  static int write(Path root) throws Exception {
    Path api = root.resolve("api");
    Files.createDirectories(api);
    List<String> modules = published(root);
    for (String module : modules) {
      Path jar = builtJar(root.resolve(module));
      byte[] surface = surfaceJar(module, jar);
      Files.write(api.resolve(module + ".jar"), surface);
      Files.writeString(api.resolve(module + ".api"), listing(module, surface));
      System.out.printf("[api] %-26s %3d classes, %6d bytes <- %s%n", module, classCount(surface), surface.length,
          root.relativize(jar));
    }
    try (var files = Files.list(api)) {
      for (Path stale : files.filter(f -> !modules.contains(artifactOf(f))).toList()) {
        Files.delete(stale);
        System.out.println("[api] removed " + root.relativize(stale) + ": no published module of that name");
      }
    }
    return 0;
  }

  /**
   * In a module's build: api/ARTIFACT.api must be the listing of api/ARTIFACT.jar (nobody edited one
   * without the other), and the listing of the jar just built must be api/ARTIFACT.api (its module
   * declaration, which japicmp does not compare, included). The new listing is left in OUT_DIR.
   */
  static int check(String artifact, String packaging, Path jar, Path apiDir, Path out) throws Exception {
    if (packaging.equals("pom")) {
      return 0;
    }
    Path baseJar = apiDir.resolve(artifact + ".jar");
    Path baseApi = apiDir.resolve(artifact + ".api");
    if (!Files.isRegularFile(baseJar) || !Files.isRegularFile(baseApi)) {
      System.out.println("[api] ERROR " + artifact + ": no baseline " + baseJar + " and " + baseApi
          + ": a published module needs one; run .ci/api-baseline and commit api/");
      return 1;
    }
    String committed = Files.readString(baseApi);
    if (!consistent(artifact, baseJar, committed)) {
      return 1;
    }
    String built = listing(artifact, surfaceJar(artifact, jar));
    Files.createDirectories(out);
    Path builtApi = out.resolve(artifact + ".api");
    Files.writeString(builtApi, built);
    if (!built.equals(committed)) {
      System.out.println("[api] ERROR " + artifact + ": the public API changed; " + ACCEPT + ".");
      System.out.println("[api] - in api/" + artifact + ".api, + in this build's " + builtApi
          + " (japicmp's report: target/japicmp/api-report.md):");
      diff(committed, built).forEach(line -> System.out.println("[api]   " + line));
      return 1;
    }
    System.out.println("[api] " + artifact + ": the public API is api/" + artifact + ".api ("
        + classCount(Files.readAllBytes(baseJar)) + " classes)");
    return 0;
  }

  /** Without a build: every published module has its pair in api/, each .api the listing of its .jar. */
  static int checkFiles(Path root) throws Exception {
    Path api = root.resolve("api");
    List<String> modules = published(root);
    int problems = 0;
    for (String module : modules) {
      Path jar = api.resolve(module + ".jar");
      Path text = api.resolve(module + ".api");
      if (!Files.isRegularFile(jar) || !Files.isRegularFile(text)) {
        System.out.println("[api] ERROR " + module + ": api/" + module + ".jar or .api is missing; run .ci/api-baseline");
        problems++;
      } else if (!consistent(module, jar, Files.readString(text))) {
        problems++;
      }
    }
    try (var files = Files.list(api)) {
      for (Path stray : files.filter(f -> !modules.contains(artifactOf(f))).toList()) {
        System.out.println("[api] ERROR " + root.relativize(stray) + ": no published module of that name");
        problems++;
      }
    }
    System.out.println("[api] " + (problems == 0 ? "OK: " + modules.size() + " modules, each .api the listing of its .jar"
        : problems + " problem(s)"));
    return problems == 0 ? 0 : 1;
  }

  static boolean consistent(String artifact, Path baseJar, String committed) throws Exception {
    String derived = listing(artifact, Files.readAllBytes(baseJar));
    if (derived.equals(committed)) {
      return true;
    }
    System.out.println("[api] ERROR " + artifact + ": api/" + artifact + ".api is not the listing of api/" + artifact
        + ".jar (one was edited without the other); regenerate both: run .ci/api-baseline and commit api/.");
    System.out.println("[api] - in api/" + artifact + ".api, + in the listing of api/" + artifact + ".jar:");
    diff(committed, derived).forEach(line -> System.out.println("[api]   " + line));
    return false;
  }

  // ---- the surface of a jar

  /** The API jar of a module's jar: its surface's class files, entries sorted, one timestamp. */
  static byte[] surfaceJar(String artifact, Path moduleJar) throws IOException {
    TreeMap<String, byte[]> kept = new TreeMap<>();
    Set<String> packages = new TreeSet<>();
    String automatic = null;
    try (JarFile jar = new JarFile(moduleJar.toFile())) {
      Manifest manifest = jar.getManifest();
      if (manifest != null) {
        automatic = manifest.getMainAttributes().getValue("Automatic-Module-Name");
      }
      for (var entries = jar.entries(); entries.hasMoreElements(); ) {
        ZipEntry entry = entries.nextElement();
        String name = entry.getName();
        if (!name.endsWith(".class") || name.startsWith("META-INF/")) {
          continue;
        }
        byte[] bytes;
        try (InputStream in = jar.getInputStream(entry)) {
          bytes = in.readAllBytes();
        }
        if (name.equals("module-info.class")) {
          kept.put(name, bytes);
          continue;
        }
        String pkg = name.contains("/") ? name.substring(0, name.lastIndexOf('/')).replace('/', '.') : "";
        int flags = accessFlags(bytes);
        if (!internal(pkg) && (flags & ACC_PUBLIC) != 0 && (flags & ACC_SYNTHETIC) == 0) {
          kept.put(name, bytes);
          packages.add(pkg);
        }
      }
    }
    byte[] info = kept.get("module-info.class");
    if (info != null) {
      ModuleDescriptor descriptor = ModuleDescriptor.read(new ByteArrayInputStream(info));
      Set<String> exported = descriptor.exports().stream().filter(e -> !e.isQualified())
          .map(ModuleDescriptor.Exports::source).collect(Collectors.toCollection(TreeSet::new));
      List<String> wrong = new ArrayList<>();
      packages.stream().filter(p -> !exported.contains(p))
          .forEach(p -> wrong.add(p + " has public classes but module-info does not export it"));
      exported.stream().filter(ApiBaseline::internal)
          .forEach(p -> wrong.add(p + " is exported to everyone but its name says internal"));
      if (!wrong.isEmpty()) {
        throw new IllegalStateException(artifact + ": " + String.join("; ", wrong) + ". The API is the public classes"
            + " of the packages without an `internal` segment, and those are what a named module exports:"
            + " export the package, or move it under an `internal` package.");
      }
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ZipOutputStream zip = new ZipOutputStream(bytes)) {
      String manifest = "Manifest-Version: 1.0\r\n"
          + (automatic == null ? "" : "Automatic-Module-Name: " + automatic + "\r\n") + "\r\n";
      put(zip, "META-INF/MANIFEST.MF", manifest.getBytes(StandardCharsets.UTF_8));
      for (Map.Entry<String, byte[]> e : kept.entrySet()) {
        put(zip, e.getKey(), e.getValue());
      }
    }
    return bytes.toByteArray();
  }

  static boolean internal(String pkg) {
    return Arrays.asList(pkg.split("\\.")).contains("internal");
  }

  static void put(ZipOutputStream zip, String name, byte[] content) throws IOException {
    ZipEntry entry = new ZipEntry(name);
    entry.setTimeLocal(ENTRY_TIME);
    zip.putNextEntry(entry);
    zip.write(content);
    zip.closeEntry();
  }

  /** A class file's access_flags, read past its constant pool (JVMS 4.1, 4.4). */
  static int accessFlags(byte[] classFile) throws IOException {
    DataInputStream in = new DataInputStream(new ByteArrayInputStream(classFile));
    if (in.readInt() != 0xCAFEBABE) {
      throw new IOException("not a class file");
    }
    in.skipBytes(4); // minor, major
    int count = in.readUnsignedShort();
    for (int i = 1; i < count; i++) {
      int tag = in.readUnsignedByte();
      switch (tag) {
        case 1 -> in.skipBytes(in.readUnsignedShort()); // Utf8
        case 7, 8, 16, 19, 20 -> in.skipBytes(2); // Class, String, MethodType, Module, Package
        case 15 -> in.skipBytes(3); // MethodHandle
        case 3, 4, 9, 10, 11, 12, 17, 18 -> in.skipBytes(4);
        case 5, 6 -> { // Long, Double: two slots
          in.skipBytes(8);
          i++;
        }
        default -> throw new IOException("constant pool tag " + tag + " unknown");
      }
    }
    return in.readUnsignedShort();
  }

  // ---- the listing of an API jar

  /** The text of an API jar: its module declaration, then each class as javap prints it, members sorted. */
  static String listing(String artifact, byte[] apiJar) throws IOException {
    StringBuilder text = new StringBuilder();
    text.append("# The public API of ").append(artifact).append(": public and protected members of the public types")
        .append(" outside `internal`\n# packages, as `javap -protected -constants` prints them, sorted.")
        .append(" Generated with api/").append(artifact).append(".jar\n# by .ci/api-baseline; edit neither by hand.")
        .append(" The build compares both with the module's jar.\n\n");
    Path tmp = Files.createTempFile("api-", ".jar");
    try {
      Files.write(tmp, apiJar);
      List<String> classes = new ArrayList<>();
      try (JarFile jar = new JarFile(tmp.toFile())) {
        ZipEntry info = jar.getEntry("module-info.class");
        if (info != null) {
          try (InputStream in = jar.getInputStream(info)) {
            text.append(module(ModuleDescriptor.read(in)));
          }
        } else {
          String automatic = jar.getManifest() == null ? null
              : jar.getManifest().getMainAttributes().getValue("Automatic-Module-Name");
          text.append(automatic == null ? "module (none: no module-info.class, no Automatic-Module-Name) {\n}\n"
              : "module " + automatic + " (automatic: Automatic-Module-Name) {\n}\n");
        }
        jar.stream().map(ZipEntry::getName).filter(n -> n.endsWith(".class") && !n.equals("module-info.class"))
            .map(n -> n.substring(0, n.length() - ".class".length()).replace('/', '.')).sorted().forEach(classes::add);
      }
      if (!classes.isEmpty()) {
        List<String> args = new ArrayList<>(List.of("-protected", "-constants", "-cp", tmp.toString()));
        args.addAll(classes);
        for (List<String> block : blocks(javap(args))) {
          text.append('\n').append(block.get(0)).append('\n');
          block.subList(1, block.size()).stream().sorted().forEach(m -> text.append(m).append('\n'));
          text.append("}\n");
        }
      }
    } finally {
      Files.delete(tmp);
    }
    return text.toString();
  }

  static String module(ModuleDescriptor d) {
    List<String> lines = new ArrayList<>();
    d.exports().forEach(e -> lines.add("exports " + e.source()
        + (e.isQualified() ? " to " + String.join(", ", new TreeSet<>(e.targets())) : "")));
    d.opens().forEach(o -> lines.add("opens " + o.source()
        + (o.isQualified() ? " to " + String.join(", ", new TreeSet<>(o.targets())) : "")));
    d.requires().stream().filter(r -> !r.modifiers().contains(ModuleDescriptor.Requires.Modifier.MANDATED))
        .forEach(r -> lines.add("requires " + r.modifiers().stream()
            .map(m -> m.name().toLowerCase() + " ").sorted().collect(Collectors.joining()) + r.name()));
    d.uses().forEach(u -> lines.add("uses " + u));
    d.provides().forEach(p -> lines.add("provides " + p.service() + " with " + String.join(", ", p.providers())));
    return "module " + d.name() + (d.isOpen() ? " (open)" : "") + " {\n"
        + lines.stream().sorted().map(l -> "  " + l + "\n").collect(Collectors.joining()) + "}\n";
  }

  static String javap(List<String> args) {
    ToolProvider javap = ToolProvider.findFirst("javap").orElseThrow(() -> new IllegalStateException("no javap: run on a JDK"));
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int status = javap.run(new PrintWriter(out), new PrintWriter(err), args.toArray(String[]::new));
    if (status != 0 || !err.toString().isBlank()) {
      throw new IllegalStateException("javap failed (" + status + "): " + err + out);
    }
    return out.toString();
  }

  /** javap's output as blocks: the class's header line, then its member lines. */
  static List<List<String>> blocks(String javap) {
    List<List<String>> blocks = new ArrayList<>();
    List<String> block = null;
    for (String line : javap.split("\n")) {
      if (line.startsWith("Compiled from ") || line.isBlank()) {
        continue;
      }
      if (block == null && line.endsWith("{") && !line.startsWith(" ")) {
        block = new ArrayList<>(List.of(line));
      } else if (block != null && line.equals("}")) {
        blocks.add(block);
        block = null;
      } else if (block != null && line.startsWith("  ")) {
        block.add(line);
      } else {
        throw new IllegalStateException("unexpected javap line: " + line);
      }
    }
    if (block != null) {
      throw new IllegalStateException("javap's output ends inside " + block.get(0));
    }
    return blocks;
  }

  // ---- the difference of two listings, per class

  /** What changed from one listing to another: a class as a whole, or its header and members. */
  static List<String> diff(String before, String after) {
    Map<String, List<String>> old = parse(before);
    Map<String, List<String>> neu = parse(after);
    List<String> out = new ArrayList<>();
    Set<String> names = new TreeSet<>(old.keySet());
    names.addAll(neu.keySet());
    for (String name : names) {
      List<String> o = old.get(name);
      List<String> n = neu.get(name);
      if (o == null) {
        n.forEach(l -> out.add("+ " + l));
      } else if (n == null) {
        o.forEach(l -> out.add("- " + l));
      } else if (!o.equals(n)) {
        if (o.get(0).equals(n.get(0))) {
          out.add("  " + o.get(0));
        } else {
          out.add("- " + o.get(0));
          out.add("+ " + n.get(0));
        }
        Set<String> gone = new TreeSet<>(o.subList(1, o.size()));
        n.subList(1, n.size()).forEach(gone::remove);
        Set<String> added = new TreeSet<>(n.subList(1, n.size()));
        o.subList(1, o.size()).forEach(added::remove);
        gone.forEach(l -> out.add("- " + l));
        added.forEach(l -> out.add("+ " + l));
      }
    }
    if (out.isEmpty()) {
      out.add("(the same classes and members; the files differ in their comments or layout)");
    }
    if (out.size() > MAX_DIFF_LINES) {
      int more = out.size() - MAX_DIFF_LINES;
      out.subList(MAX_DIFF_LINES, out.size()).clear();
      out.add("... and " + more + " more lines");
    }
    return out;
  }

  /** A listing's blocks by name ("module x", or the class's name), each its header then its members. */
  static Map<String, List<String>> parse(String listing) {
    Map<String, List<String>> blocks = new LinkedHashMap<>();
    List<String> block = null;
    for (String line : listing.split("\n")) {
      if (line.isBlank() || line.startsWith("#") || line.equals("}")) {
        continue;
      }
      if (!line.startsWith(" ")) {
        block = new ArrayList<>(List.of(line));
        blocks.put(name(line), block);
      } else if (block != null) {
        block.add(line);
      }
    }
    return blocks;
  }

  /** "module dev.idem.core" or "dev.idem.Foo$Bar" from a header line. */
  static String name(String header) {
    String[] words = header.split(" ");
    for (int i = 0; i < words.length - 1; i++) {
      if (words[i].equals("module")) {
        return "module " + words[i + 1];
      }
      if (words[i].equals("class") || words[i].equals("interface")) {
        String name = words[i + 1];
        int generic = name.indexOf('<');
        return generic < 0 ? name : name.substring(0, generic);
      }
    }
    return header;
  }

  // ---- the modules and their jars

  /** The root pom's modules that are published: jar-packaged, not maven.deploy.skip. */
  static List<String> published(Path root) throws Exception {
    List<String> modules = new ArrayList<>();
    Element parent = pom(root.resolve("pom.xml"));
    NodeList listed = ((Element) parent.getElementsByTagName("modules").item(0)).getElementsByTagName("module");
    for (int i = 0; i < listed.getLength(); i++) {
      String dir = listed.item(i).getTextContent().trim();
      Element pom = pom(root.resolve(dir).resolve("pom.xml"));
      String packaging = direct(pom, "packaging");
      Element properties = pom.getElementsByTagName("properties").getLength() == 0 ? null
          : (Element) pom.getElementsByTagName("properties").item(0);
      boolean unpublished = properties != null && "true".equals(direct(properties, "maven.deploy.skip"));
      if (!"pom".equals(packaging) && !unpublished) {
        modules.add(direct(pom, "artifactId"));
      }
    }
    return modules;
  }

  static Element pom(Path file) throws Exception {
    return DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(file.toFile()).getDocumentElement();
  }

  /** The text of an element's own child of that tag (not a descendant's), or null. */
  static String direct(Element element, String tag) {
    for (var n = element.getFirstChild(); n != null; n = n.getNextSibling()) {
      if (n instanceof Element e && e.getTagName().equals(tag)) {
        return e.getTextContent().trim();
      }
    }
    return null;
  }

  /** The jar the last package of a module made, named by its target/maven-archiver/pom.properties. */
  static Path builtJar(Path module) throws IOException {
    Path properties = module.resolve("target/maven-archiver/pom.properties");
    if (!Files.isRegularFile(properties)) {
      throw new IllegalStateException(module.getFileName() + " is not built: no " + properties + " (mvn package)");
    }
    Properties p = new Properties();
    try (InputStream in = Files.newInputStream(properties)) {
      p.load(in);
    }
    Path jar = module.resolve("target/" + p.getProperty("artifactId") + "-" + p.getProperty("version") + ".jar");
    if (!Files.isRegularFile(jar)) {
      throw new IllegalStateException("no " + jar + " (mvn package)");
    }
    return jar;
  }

  static String artifactOf(Path apiFile) {
    String name = apiFile.getFileName().toString();
    int dot = name.lastIndexOf('.');
    return dot < 0 ? name : name.substring(0, dot);
  }

  static int classCount(byte[] apiJar) throws IOException {
    int count = 0;
    try (var in = new java.util.zip.ZipInputStream(new ByteArrayInputStream(apiJar))) {
      for (ZipEntry e; (e = in.getNextEntry()) != null; ) {
        if (e.getName().endsWith(".class") && !e.getName().equals("module-info.class")) {
          count++;
        }
      }
    }
    return count;
  }
}
