package dev.idem.docs;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.source.util.JavacTask;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;

/**
 * Every {@code ```java} block of README.md and docs/*.md compiles as printed, imports included,
 * against this module's test class path (which holds every idem module). The convention, also told
 * at the top of docs/README.md:
 *
 * <ul>
 *   <li>a block starts with its imports (and may have a {@code package} line), then is one of:
 *       statements (the test puts them in a method {@code void snippet() throws Exception}), a
 *       whole compilation unit (top-level types), or class members (fields, methods, nested
 *       types: put in a class). The test tells them apart by parsing: statements if the block
 *       parses as a method body, else a compilation unit if it parses as one, else members;
 *   <li>a block declares everything it uses, except the two {@link #GIVENS}: {@code dataSource}
 *       (the application's {@code javax.sql.DataSource}) and {@code idem} (an {@code Idem} built on
 *       it), which statements and members may use without declaring them;
 *   <li>each block is its own compilation unit in a package of its own, so blocks never see each
 *       other's imports or types.
 * </ul>
 *
 * <p>All blocks are parsed in three javac passes and compiled (attributed and flow-checked, no
 * class files) in one; a failure is reported as {@code file:line} of the Markdown with javac's
 * message. The generated code keeps each block's lines where they are (the wrapping goes on the
 * block's first line and after its last), so javac's line is the Markdown's.
 */
class DocsSnippetsTest {

  /** What statements and members may use without declaring it. */
  static final String GIVENS = """
      package snippets;

      /** What a block of the docs may use without declaring it. */
      public abstract class Givens {
        /** The application's pool. */
        protected javax.sql.DataSource dataSource;
        /** {@code Idem.builder(dataSource).build()}. */
        protected dev.idem.jdbc.Idem idem;
      }
      """;

  private static final Pattern FENCE_OPEN = Pattern.compile("^(\\s*)```java\\s*$");
  private static final Pattern FENCE_CLOSE = Pattern.compile("^\\s*```\\s*$");
  private static final Pattern PUBLIC_TYPE = Pattern.compile(
      "^public\\s+(?:(?:final|abstract|sealed|non-sealed|strictfp)\\s+)*(?:class|interface|record|enum|@interface)\\s+(\\w+)");
  private static final Pattern HEADER_LINE = Pattern.compile("^\\s*(import\\s+[\\w.*\\s]+;|package\\s+[\\w.]+;)\\s*(//.*)?$");

  /** The forms a block may take, in the order they are tried. */
  enum Form {
    STATEMENTS, UNIT, MEMBERS
  }

  /** One {@code ```java} block: {@code line} is the Markdown line of its first code line. */
  record Snippet(int index, String file, int line, List<String> lines) {
    String where(long snippetLine) {
      return file + ":" + (line + snippetLine - 1);
    }

    /** The number of leading lines that are imports, a package line, blank lines or line comments. */
    int headerLength() {
      int last = 0;
      for (int i = 0; i < lines.size(); i++) {
        String l = lines.get(i).strip();
        if (HEADER_LINE.matcher(l).matches()) {
          last = i + 1;
        } else if (!l.isEmpty() && !l.startsWith("//")) {
          break;
        }
      }
      return last;
    }

    /** The generated file's simple name: a public top-level type's, which javac requires, else Snippet. */
    String fileName(Form form) {
      if (form == Form.UNIT) {
        for (String l : lines) {
          Matcher m = PUBLIC_TYPE.matcher(l);
          if (m.find()) {
            return m.group(1);
          }
        }
      }
      return "Snippet";
    }

    boolean declaresPackage() {
      return lines.stream().limit(headerLength()).anyMatch(l -> l.strip().startsWith("package "));
    }

    /** The block as a compilation unit of the given form, each line where it was. */
    String source(Form form) {
      List<String> out = new ArrayList<>(lines.isEmpty() ? List.of("") : lines);
      int header = headerLength();
      int body = header < out.size() ? header : 0;
      String open = switch (form) {
        case STATEMENTS -> "class Snippet extends snippets.Givens { void snippet() throws Exception { ";
        case MEMBERS -> "class Snippet extends snippets.Givens { ";
        case UNIT -> "";
      };
      String close = switch (form) {
        case STATEMENTS -> "}}";
        case MEMBERS -> "}";
        case UNIT -> "";
      };
      out.set(body, open + out.get(body));
      if (!declaresPackage()) {
        out.set(0, "package snippets.s" + index + "; " + out.get(0));
      }
      out.add(close);
      return String.join("\n", out);
    }
  }

  @Test
  void everyJavaBlockOfTheDocsCompilesAsPrinted() throws IOException {
    Path root = repositoryRoot();
    List<Snippet> snippets = new ArrayList<>();
    List<Path> pages = new ArrayList<>(List.of(root.resolve("README.md")));
    try (Stream<Path> docs = Files.list(root.resolve("docs"))) {
      docs.filter(p -> p.toString().endsWith(".md")).sorted(Comparator.comparing(Path::toString)).forEach(pages::add);
    }
    for (Path page : pages) {
      snippets.addAll(extract(root.relativize(page).toString().replace('\\', '/'), Files.readAllLines(page), snippets.size()));
    }
    assertThat(snippets).as("java blocks found in README.md and docs/*.md").hasSizeGreaterThan(30);

    Map<Snippet, Form> forms = forms(snippets);
    Map<Snippet, List<String>> failures = compile(snippets, forms);

    List<String> required = new ArrayList<>();
    for (Snippet s : snippets) {
      List<String> messages = failures.get(s);
      if (messages != null) {
        required.add(s.file() + ":" + s.line() + ", compiled as "
            + forms.get(s).name().toLowerCase(Locale.ROOT) + ":\n  " + String.join("\n  ", messages));
      }
    }
    if (!required.isEmpty()) {
      throw new AssertionError(required.size() + " of " + snippets.size() + " java blocks of the docs do not compile"
          + " (the convention: DocsSnippetsTest's Javadoc, or the top of docs/README.md):\n\n" + String.join("\n\n", required));
    }
  }

  @Test
  void aBlockThatDoesNotCompileIsReportedAtItsMarkdownLineWithJavacsMessage() {
    List<String> page = List.of(
        "# A page",                                              // 1
        "```java",                                               // 2
        "import dev.idem.key.IdempotencyKey;",                   // 3
        "",                                                      // 4
        "IdempotencyKey key = IdempotencyKey.of(\"s\", \"k\");",   // 5: statements, compile
        "```",                                                   // 6
        "```java",                                               // 7
        "IdempotencyKey key = IdempotencyKey.of(\"s\", \"k\");",   // 8: no import
        "```",                                                   // 9
        "```java",                                               // 10
        "import dev.idem.jdbc.inbox.Inbox;",                     // 11
        "",                                                      // 12
        "Inbox billing = idem.inbox(\"billing\").build();",      // 13: members, with a given
        "",                                                      // 14
        "boolean done(String id) {",                             // 15
        "  return !billing.receive(id, tx -> {}).inFlight();",   // 16
        "}",                                                     // 17
        "```",                                                   // 18
        "```java",                                               // 19
        "record Order(String id) {}",                            // 20: statements (a local record)
        "Order o = new Order(1);",                               // 21: wrong argument
        "```",                                                   // 22
        "```java",                                               // 23
        "public final class Checkout {",                         // 24: a compilation unit, in Checkout.java
        "  void pay() { undefined(); }",                         // 25
        "}",                                                     // 26
        "```");
    List<Snippet> snippets = extract("docs/page.md", page, 0);
    assertThat(snippets).extracting(Snippet::line).containsExactly(3, 8, 11, 20, 24);
    Map<Snippet, Form> forms = forms(snippets);
    assertThat(snippets).extracting(forms::get)
        .containsExactly(Form.STATEMENTS, Form.STATEMENTS, Form.MEMBERS, Form.STATEMENTS, Form.UNIT);

    Map<Snippet, List<String>> failures = compile(snippets, forms);
    assertThat(failures).containsOnlyKeys(snippets.get(1), snippets.get(3), snippets.get(4));
    assertThat(failures.get(snippets.get(1))).allSatisfy(m -> assertThat(m).startsWith("docs/page.md:8: cannot find symbol"))
        .anySatisfy(m -> assertThat(m).contains("class IdempotencyKey").doesNotContain("snippets.s"));
    assertThat(failures.get(snippets.get(3))).singleElement().asString().startsWith("docs/page.md:21: ")
        .contains("int cannot be converted to java.lang.String");
    assertThat(failures.get(snippets.get(4))).singleElement().asString().startsWith("docs/page.md:25: cannot find symbol")
        .contains("undefined()");
  }

  /** The directory holding README.md and docs/, found upwards from the module's. */
  static Path repositoryRoot() {
    for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
      if (Files.isRegularFile(p.resolve("README.md")) && Files.isDirectory(p.resolve("docs"))) {
        return p;
      }
    }
    throw new IllegalStateException("no README.md with a docs/ directory above " + Path.of("").toAbsolutePath());
  }

  /** The {@code ```java} blocks of one page, numbered from {@code firstIndex}. */
  static List<Snippet> extract(String file, List<String> lines, int firstIndex) {
    List<Snippet> out = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      Matcher open = FENCE_OPEN.matcher(lines.get(i));
      if (!open.matches()) {
        continue;
      }
      int indent = open.group(1).length();
      List<String> code = new ArrayList<>();
      int j = i + 1;
      while (j < lines.size() && !FENCE_CLOSE.matcher(lines.get(j)).matches()) {
        String l = lines.get(j);
        code.add(l.length() >= indent && l.substring(0, indent).isBlank() ? l.substring(indent) : l.strip());
        j++;
      }
      if (j == lines.size()) {
        throw new AssertionError(file + ":" + (i + 1) + ": a ```java block that is never closed");
      }
      out.add(new Snippet(firstIndex + out.size(), file, i + 2, code));
      i = j;
    }
    return out;
  }

  /** Each block's form: the first that parses, else the one that parses furthest (its errors are the most telling). */
  static Map<Snippet, Form> forms(List<Snippet> snippets) {
    Map<Snippet, Form> chosen = new HashMap<>();
    Map<Snippet, Long> furthest = new HashMap<>();
    List<Snippet> left = snippets;
    for (Form form : Form.values()) {
      if (left.isEmpty()) {
        break;
      }
      Map<Snippet, Long> firstError = parse(left, form);
      List<Snippet> next = new ArrayList<>();
      for (Snippet s : left) {
        Long error = firstError.get(s);
        if (error == null) {
          chosen.put(s, form);
          continue;
        }
        if (!furthest.containsKey(s) || error > furthest.get(s)) {
          furthest.put(s, error);
          chosen.put(s, form);
        }
        next.add(s);
      }
      left = next;
    }
    return chosen;
  }

  /** The line of the first syntax error of each block that does not parse in {@code form}. */
  private static Map<Snippet, Long> parse(List<Snippet> snippets, Form form) {
    Map<JavaFileObject, Snippet> sources = sources(snippets, s -> form);
    DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
    JavacTask task = task(sources, diagnostics);
    try {
      task.parse();
    } catch (IOException e) {
      throw new AssertionError(e);
    }
    Map<Snippet, Long> firstError = new HashMap<>();
    for (Diagnostic<? extends JavaFileObject> d : diagnostics.getDiagnostics()) {
      Snippet s = sources.get(d.getSource());
      if (d.getKind() == Diagnostic.Kind.ERROR && s != null) {
        firstError.merge(s, d.getLineNumber(), Math::min);
      }
    }
    return firstError;
  }

  /** Attributes and flow-checks every block in one javac run; javac's errors per block. */
  static Map<Snippet, List<String>> compile(List<Snippet> snippets, Map<Snippet, Form> forms) {
    Map<JavaFileObject, Snippet> sources = sources(snippets, forms::get);
    DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
    List<JavaFileObject> units = new ArrayList<>(sources.keySet());
    units.add(new Source("snippets/Givens", GIVENS));
    JavacTask task = task(units, diagnostics);
    try {
      task.analyze();
    } catch (IOException e) {
      throw new AssertionError(e);
    }
    Map<Snippet, List<String>> failures = new HashMap<>();
    List<Diagnostic<? extends JavaFileObject>> inLineOrder = new ArrayList<>(diagnostics.getDiagnostics());
    inLineOrder.sort(Comparator.comparingLong(Diagnostic::getLineNumber));
    for (Diagnostic<? extends JavaFileObject> d : inLineOrder) {
      if (d.getKind() != Diagnostic.Kind.ERROR) {
        continue;
      }
      Snippet s = sources.get(d.getSource());
      if (s == null) {
        throw new AssertionError("javac: " + d);
      }
      String line = d.getLineNumber() >= 1 && d.getLineNumber() <= s.lines().size() ? s.lines().get((int) d.getLineNumber() - 1).strip() : "";
      failures.computeIfAbsent(s, k -> new ArrayList<>())
          .add(s.where(d.getLineNumber()) + ": " + message(d)
              + (line.isEmpty() ? "" : "\n    | " + line));
    }
    return failures;
  }

  /** javac's message without the generated class's name ("location: class snippets.s7.Snippet"). */
  private static String message(Diagnostic<?> d) {
    return d.getMessage(Locale.ROOT).lines().filter(l -> !l.strip().startsWith("location: class snippets."))
        .collect(Collectors.joining("\n    "));
  }

  private static Map<JavaFileObject, Snippet> sources(List<Snippet> snippets, java.util.function.Function<Snippet, Form> form) {
    Map<JavaFileObject, Snippet> sources = new HashMap<>();
    for (Snippet s : snippets) {
      Form f = form.apply(s);
      sources.put(new Source("snippets/s" + s.index() + "/" + s.fileName(f), s.source(f)), s);
    }
    return sources;
  }

  private static JavacTask task(Map<JavaFileObject, Snippet> sources, DiagnosticCollector<JavaFileObject> diagnostics) {
    return task(new ArrayList<>(sources.keySet()), diagnostics);
  }

  private static JavacTask task(List<JavaFileObject> units, DiagnosticCollector<JavaFileObject> diagnostics) {
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    assertThat(javac).as("a JDK's compiler (this test needs a JDK, not a JRE)").isNotNull();
    List<String> options = List.of("-proc:none", "-Xmaxerrs", "100000", "-Xlint:none",
        "-classpath", System.getProperty("java.class.path"));
    return (JavacTask) javac.getTask(null, javac.getStandardFileManager(diagnostics, Locale.ROOT, null), diagnostics,
        options, null, units);
  }

  /** Java source held in memory. */
  private static final class Source extends SimpleJavaFileObject {
    private final String code;

    Source(String path, String code) {
      super(URI.create("string:///" + path + Kind.SOURCE.extension), Kind.SOURCE);
      this.code = code;
    }

    @Override
    public CharSequence getCharContent(boolean ignoreEncodingErrors) {
      return code;
    }

    @Override
    public String toString() {
      return uri.toString();
    }
  }
}
