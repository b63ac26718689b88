import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.jar.JarFile;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Element;
import org.w3c.dom.Node;

/**
 * The bundle check of the release build (mvn -B verify -Prelease): after every module is packaged
 * and signed, checks what a release would upload against Maven Central's published requirements,
 * then lays the bundle out as a repository and zips it (target/central-bundle.zip), the form the
 * Central Portal takes.
 *
 * <p>Published: the parent pom and every module it lists, except those whose pom sets
 * maven.deploy.skip (examples, benchmarks). For each: a pom with name and description of its own,
 * and url, licenses, developers and scm (its own or the parent's, as Central reads them); the
 * jar, -sources.jar and -javadoc.jar for a jar module; an .asc signature beside every file; a
 * stable module name (module-info or Automatic-Module-Name). No third-party SNAPSHOT among the
 * resolved dependencies: the root pom's maven-enforcer-plugin (requireReleaseDeps) checks that in
 * every build.
 *
 * <p>The project's own version is a SNAPSHOT between releases: then this says so and goes on;
 * with release=true (mvn ... -Dbundle.release=true, on a version set for release) it is an error.
 *
 * <p>Run by .ci/bundle-check/pom.xml: java CheckBundle.java ROOT RELEASE OUTPUT_DIR
 */
public class CheckBundle {
  private final List<String> errors = new ArrayList<>();
  /** A file of the bundle and its folder there (the repository layout). */
  private record Entry(String folder, Path file) {}

  private final List<Entry> bundle = new ArrayList<>();

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      throw new IllegalArgumentException("usage: CheckBundle ROOT RELEASE(true|false) OUTPUT_DIR");
    }
    new CheckBundle().run(Path.of(args[0]).toRealPath(), Boolean.parseBoolean(args[1]), Path.of(args[2]));
  }

  private void run(Path root, boolean release, Path out) throws Exception {
    Element parent = read(root.resolve("pom.xml"));
    String version = text(parent, "version");
    if (version.endsWith("-SNAPSHOT")) {
      if (release) {
        errors.add("version " + version + ": Central takes no SNAPSHOT (set the release version first, see CHANGELOG.md)");
      } else {
        System.out.println("[bundle] version " + version + " is a SNAPSHOT: checked as a release would be, but Central"
            + " would refuse it (-Dbundle.release=true makes this an error)");
      }
    }
    check(root, parent, null, version);
    for (Element module : children(child(parent, "modules"), "module")) {
      Path dir = root.resolve(module.getTextContent().trim());
      Element pom = read(dir.resolve("pom.xml"));
      String artifactId = text(pom, "artifactId");
      Element properties = child(pom, "properties");
      if ("true".equals(text(properties, "maven.deploy.skip"))) {
        System.out.println("[bundle] " + artifactId + ": not published (maven.deploy.skip)");
        continue;
      }
      check(dir, pom, child(pom, "parent") == null ? null : parent, version);
    }
    if (!errors.isEmpty()) {
      errors.forEach(e -> System.out.println("[bundle] ERROR " + e));
      System.out.println("[bundle] " + errors.size() + " problem(s): Central would refuse this bundle");
      System.exit(1);
    }
    Path zip = stage(root, out);
    System.out.println("[bundle] OK: " + bundle.size() + " files, each signed, in " + zip);
  }

  /** One published project: its pom's metadata, its files and their signatures, its module name. */
  private void check(Path dir, Element pom, Element parent, String version) throws IOException {
    String artifactId = text(pom, "artifactId");
    String own = text(pom, "version") == null ? text(child(pom, "parent"), "version") : text(pom, "version");
    if (!version.equals(own)) {
      errors.add(artifactId + ": version " + own + ", not the project's " + version);
    }
    for (String tag : List.of("name", "description")) {
      if (blank(text(pom, tag))) {
        errors.add(artifactId + ": pom.xml has no <" + tag + "> of its own");
      }
    }
    Element url = inherited(pom, parent, "url");
    Element licenses = inherited(pom, parent, "licenses");
    Element developers = inherited(pom, parent, "developers");
    Element scm = inherited(pom, parent, "scm");
    if (url == null || blank(url.getTextContent())) {
      errors.add(artifactId + ": no <url>");
    }
    if (licenses == null || children(licenses, "license").isEmpty()
        || children(licenses, "license").stream().anyMatch(l -> blank(text(l, "name")) || blank(text(l, "url")))) {
      errors.add(artifactId + ": <licenses> needs a license with <name> and <url>");
    }
    if (developers == null || children(developers, "developer").isEmpty()
        || children(developers, "developer").stream().anyMatch(d -> blank(text(d, "id")) && blank(text(d, "name")))) {
      errors.add(artifactId + ": <developers> needs a developer with <id> or <name>");
    }
    if (scm == null || blank(text(scm, "connection")) || blank(text(scm, "url"))) {
      errors.add(artifactId + ": <scm> needs <connection> and <url>");
    }
    String base = artifactId + "-" + version;
    Path target = dir.resolve("target");
    List<String> files = "pom".equals(text(pom, "packaging"))
        ? List.of(base + ".pom")
        : List.of(base + ".pom", base + ".jar", base + "-sources.jar", base + "-javadoc.jar");
    for (String name : files) {
      Path file = target.resolve(name);
      Path signature = target.resolve(name + ".asc");
      if (!Files.isRegularFile(file) || Files.size(file) == 0) {
        errors.add(artifactId + ": no " + root(file) + " (did mvn -Prelease verify build it?)");
        continue;
      }
      if (!Files.isRegularFile(signature)
          || !Files.readString(signature, StandardCharsets.US_ASCII).startsWith("-----BEGIN PGP SIGNATURE-----")) {
        errors.add(artifactId + ": no signature " + root(signature));
        continue;
      }
      String folder = "dev/idem/" + artifactId + "/" + version + "/";
      bundle.add(new Entry(folder, file));
      bundle.add(new Entry(folder, signature));
    }
    Path jar = target.resolve(base + ".jar");
    if (files.size() > 1 && Files.isRegularFile(jar)) {
      try (JarFile j = new JarFile(jar.toFile())) {
        boolean described = j.getEntry("module-info.class") != null;
        String automatic = j.getManifest() == null ? null : j.getManifest().getMainAttributes().getValue("Automatic-Module-Name");
        if (!described && blank(automatic)) {
          errors.add(artifactId + ": " + jar.getFileName() + " has no module name (neither module-info.class nor Automatic-Module-Name)");
        }
      }
      try (JarFile j = new JarFile(target.resolve(base + "-javadoc.jar").toFile())) {
        if (j.getEntry("index.html") == null) {
          errors.add(artifactId + ": the javadoc jar has no index.html");
        }
      } catch (IOException missing) {
        // reported above
      }
    }
  }

  /** The bundle as Central's repository layout, each file with its .md5 and .sha1, zipped. */
  private Path stage(Path root, Path out) throws Exception {
    Files.createDirectories(out);
    Path zip = out.resolve("central-bundle.zip");
    try (ZipOutputStream z = new ZipOutputStream(Files.newOutputStream(zip))) {
      for (Entry entry : bundle) {
        String name = entry.file().getFileName().toString();
        String folder = entry.folder();
        byte[] bytes = Files.readAllBytes(entry.file());
        put(z, folder + name, bytes);
        if (!name.endsWith(".asc")) {
          put(z, folder + name + ".md5", hex("MD5", bytes));
          put(z, folder + name + ".sha1", hex("SHA-1", bytes));
        }
      }
    }
    return root.relativize(zip.toAbsolutePath().normalize());
  }

  private static void put(ZipOutputStream z, String name, byte[] bytes) throws IOException {
    z.putNextEntry(new ZipEntry(name));
    z.write(bytes);
    z.closeEntry();
  }

  private static byte[] hex(String algorithm, byte[] bytes) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance(algorithm).digest(bytes)).getBytes(StandardCharsets.US_ASCII);
  }

  private static String root(Path file) {
    return file.getParent().getParent().getFileName() + "/target/" + file.getFileName();
  }

  private static Element inherited(Element pom, Element parent, String tag) {
    Element own = child(pom, tag);
    return own != null || parent == null ? own : child(parent, tag);
  }

  private static Element read(Path pom) throws Exception {
    return DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(pom.toFile()).getDocumentElement();
  }

  private static Element child(Element parent, String tag) {
    List<Element> found = children(parent, tag);
    return found.isEmpty() ? null : found.get(0);
  }

  private static List<Element> children(Element parent, String tag) {
    List<Element> found = new ArrayList<>();
    if (parent != null) {
      for (Node n = parent.getFirstChild(); n != null; n = n.getNextSibling()) {
        if (n instanceof Element e && e.getTagName().equals(tag)) {
          found.add(e);
        }
      }
    }
    return found;
  }

  private static String text(Element parent, String tag) {
    Element e = child(parent, tag);
    return e == null ? null : e.getTextContent().trim();
  }

  private static boolean blank(String s) {
    return s == null || s.isBlank();
  }
}
