package dev.idem.examples;

import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * The command line of the double-charge lab. With no option it runs every scenario and the small
 * tours and prints a table of results; {@code --help} says the rest.
 */
public final class Tour {
  private Tour() {}

  /** A bad command line: the message says what was wrong and lists what is valid. */
  static final class UsageException extends Exception {
    UsageException(String message) {
      super(message);
    }
  }

  /**
   * What the command line asked for; {@code prove}: {@code --prove}, which runs alone ({@link
   * Proof}); {@code db}: the database every run makes its own on ({@code --db}, else {@link
   * #defaultDatabase}).
   */
  record Options(List<Scenario> scenarios, List<String> tours, boolean trace, boolean help, LabQueue.Kind queue,
      boolean prove, TestDatabase.Vendor db) {}

  public static void main(String[] args) throws Exception {
    Options options;
    try {
      // The lab as a page (LabPage): --page [--port=<n>] [--db=..], handled before the command line's runs.
      if (java.util.Arrays.asList(args).contains("--page")) {
        Lab.useDatabase(database(args));
        LabPage.serve(pagePort(args));
        return;
      }
      options = parse(args);
    } catch (UsageException e) {
      System.err.println("idem-examples: " + e.getMessage());
      System.err.println("Run with --help for the options.");
      System.exit(2);
      return;
    }
    if (options.help()) {
      System.out.print(usage());
      return;
    }
    try {
      run(options, System.out);
    } finally {
      LabQueue.stopBroker(); // --queue=kafka: ends as the in-process run does
    }
  }

  /** The port of {@code --page}: {@code --port=<n>}, default 8040 (0 picks a free one). */
  static int pagePort(String[] args) {
    for (String arg : args) {
      if (arg.startsWith("--port=")) {
        try {
          int port = Integer.parseInt(arg.substring("--port=".length()));
          if (port >= 0 && port <= 65535) {
            return port;
          }
        } catch (NumberFormatException e) {
          // reported below
        }
        System.err.println("idem-examples: --port must be a number from 0 to 65535, was '" + arg.substring(7) + "'");
        System.exit(2);
      }
    }
    return 8040;
  }

  /**
   * The database of {@code --db=postgresql|mariadb}, else {@link #defaultDatabase}.
   *
   * @throws UsageException naming the unknown database and the valid ones
   */
  static TestDatabase.Vendor database(String[] args) throws UsageException {
    TestDatabase.Vendor chosen = null;
    for (String arg : args) {
      if (arg.startsWith("--db=")) {
        chosen = vendorNamed(arg.substring("--db=".length()), "--db");
      }
    }
    return chosen != null ? chosen : defaultDatabase();
  }

  /**
   * The database without {@code --db}: the one idem's test fixture would choose ({@link
   * TestDatabase}): {@code IDEM_TEST_DATABASE} (system property, else environment), else the one
   * {@code IDEM_JDBC_URL} names ({@code jdbc:mariadb:} or {@code jdbc:mysql:} is MariaDB), else
   * PostgreSQL.
   */
  static TestDatabase.Vendor defaultDatabase() throws UsageException {
    String chosen = System.getProperty(Lab.DATABASE_PROPERTY);
    if (chosen == null || chosen.isBlank()) {
      chosen = System.getenv(Lab.DATABASE_PROPERTY);
    }
    if (chosen != null && !chosen.isBlank()) {
      return vendorNamed(chosen, Lab.DATABASE_PROPERTY);
    }
    String url = System.getenv("IDEM_JDBC_URL");
    url = url == null ? "" : url.trim();
    return url.startsWith("jdbc:mariadb:") || url.startsWith("jdbc:mysql:") ? TestDatabase.Vendor.MARIADB
        : TestDatabase.Vendor.POSTGRESQL;
  }

  private static TestDatabase.Vendor vendorNamed(String name, String where) throws UsageException {
    return switch (name.trim().toLowerCase(Locale.ROOT)) {
      case "postgresql" -> TestDatabase.Vendor.POSTGRESQL;
      case "mariadb" -> TestDatabase.Vendor.MARIADB;
      default -> throw new UsageException(where + ": unknown database '" + name.trim() + "'; valid: postgresql, mariadb");
    };
  }

  static Options parse(String[] args) throws UsageException {
    TestDatabase.Vendor db = database(args);
    String scenario = null;
    String faults = null;
    String guards = null;
    boolean trace = false;
    boolean prove = false;
    int given = 0;
    LabQueue.Kind queue = LabQueue.Kind.MEMORY;
    for (String arg : args) {
      if (arg.isBlank()) {
        continue; // exec:java passes an empty argument when -Dexec.args is empty
      }
      if (arg.startsWith("--db=")) {
        continue; // read above; --prove takes it too
      }
      given++;
      if (arg.equals("--help") || arg.equals("-h")) {
        return new Options(List.of(), List.of(), false, true, queue, false, db);
      } else if (arg.equals("--prove")) {
        prove = true;
      } else if (arg.equals("--trace")) {
        trace = true;
      } else if (arg.startsWith("--scenario=")) {
        scenario = arg.substring("--scenario=".length());
      } else if (arg.startsWith("--faults=")) {
        faults = arg.substring("--faults=".length());
      } else if (arg.startsWith("--guards=")) {
        guards = arg.substring("--guards=".length());
      } else if (arg.equals("--queue=kafka") || arg.equals("--queue=memory")) {
        queue = arg.endsWith("kafka") ? LabQueue.Kind.KAFKA : LabQueue.Kind.MEMORY;
      } else {
        throw new UsageException("unknown option '" + arg + "'; valid options: --scenario=<name>[,<name>...],"
            + " --faults=<list>, --guards=<list>, --queue=memory|kafka, --db=postgresql|mariadb, --trace, --prove, --help");
      }
    }
    if (prove) {
      if (given > 1) {
        throw new UsageException("--prove runs on its own (the payments service alone, guard off then on); give it"
            + " without other options (--db aside)");
      }
      return new Options(List.of(), List.of(), false, false, queue, true, db);
    }
    if (scenario != null && (faults != null || guards != null)) {
      throw new UsageException("--scenario chooses its own faults and guards; give either --scenario or"
          + " --faults/--guards (a custom run), not both");
    }
    if (faults != null || guards != null) {
      Setup setup;
      try {
        setup = Setup.of(faults, guards);
      } catch (IllegalArgumentException e) {
        throw new UsageException(e.getMessage());
      }
      return new Options(List.of(new Scenario("custom", setup, "your own choice of faults and guards")), List.of(), true, false, queue, false, db);
    }
    if (scenario == null || scenario.equals("all")) {
      return new Options(Scenario.ALL, Tours.NAMES, trace, false, queue, false, db);
    }
    List<Scenario> scenarios = new ArrayList<>();
    List<String> tours = new ArrayList<>();
    for (String name : new LinkedHashSet<>(List.of(scenario.split(",", -1)))) {
      String n = name.trim();
      if (Tours.NAMES.contains(n)) {
        tours.add(n);
      } else {
        scenarios.add(Scenario.named(n).orElseThrow(() -> new UsageException(
            "--scenario: unknown scenario '" + n + "'; valid: " + validScenarios())));
      }
    }
    return new Options(scenarios, tours, trace || scenarios.size() == 1, false, queue, false, db);
  }

  static String validScenarios() {
    return Scenario.ALL.stream().map(Scenario::name).collect(Collectors.joining(", "))
        + ", " + String.join(", ", Tours.NAMES) + ", all";
  }

  static String usage() {
    StringBuilder out = new StringBuilder();
    out.append("idem double-charge lab: one tap on Pay for a $40 order crosses six hops.\n\n")
        .append("Usage (from the repository root):\n")
        .append("  mvn -B -q -pl idem-examples -am package -DskipTests exec:java [-Dexec.args=\"<options>\"]\n\n")
        .append("Options:\n")
        .append("  --scenario=<name>[,<name>...]  run named scenarios or tours (default: all of them)\n")
        .append("  --faults=<list>                a custom run: which hops repeat what they received (once each)\n")
        .append("  --guards=<list>                a custom run: which guards are on\n")
        .append("  --queue=memory|kafka           the queue hop in process (default) or over a Kafka broker started in this JVM\n")
        .append("  --db=postgresql|mariadb        the database each run makes its own on (default: IDEM_JDBC_URL's, else\n")
        .append("                                 PostgreSQL; the server: IDEM_JDBC_URL if it is that database's, else a local\n")
        .append("                                 or embedded one)\n")
        .append("  --trace                        print what happened on the way (default for a single run)\n")
        .append("  --prove                        prove the payments service with idem's test kit (docs/testing.md):\n")
        .append("                                 Repeats on POST /payments, its guard off, then on\n")
        .append("  --help                         this text\n")
        .append("  --page [--port=<n>]            serve the lab as a page on http://127.0.0.1:<n>/ (default 8040)\n\n")
        .append("Scenarios:\n");
    for (Scenario s : Scenario.ALL) {
      out.append(String.format("  %-26s %s%n", s.name(), s.setup()));
    }
    for (String t : Tours.NAMES) {
      out.append(String.format("  %-26s %s%n", t, Tours.describe(t)));
    }
    out.append("\nFaults and guards, hop by hop (a list is comma-separated names, all or none):\n");
    for (Hop h : Hop.values()) {
      out.append(String.format("  %d %-9s fault %-14s %s%n", h.ordinal() + 1, h.cliName(), h.faultName(), h.fault()))
          .append(String.format("    %-9s guard %-14s %s%n", "", h.guardName(), h.guard()));
    }
    out.append("\nEach run ends with two lines for scripts: scenario=<name> payment_rows=<n> charges=<n> receipts=<n>\n")
        .append("and breaks scenario=<name> duplicate_intents=<n> effects_without_key=<n> unknown_outcomes=<n> two_ids_for_one_intent=<n>\n");
    return out.toString();
  }

  static void run(Options options, PrintStream out) throws Exception {
    Lab.useDatabase(options.db());
    if (options.prove()) {
      try (TestDatabase db = TestDatabase.newDatabase("lab_prove")) {
        Proof.run(db, out);
      }
      return;
    }
    out.println("idem double-charge lab: one tap on Pay for a $40 order, six hops, real HTTP on loopback");
    out.println("database: " + describeServer(options.db()));
    LabQueue.use(options.queue());
    if (options.queue() == LabQueue.Kind.KAFKA) {
      out.println("queue: a Kafka broker in this JVM (KRaft, one node), one topic per run");
    }
    out.println();
    List<RunResult> results = new ArrayList<>();
    for (Scenario s : options.scenarios()) {
      RunResult r = s.run();
      results.add(r);
      if (options.trace()) {
        out.println("-- " + s.name() + ": " + s.setup());
        r.trace().forEach(line -> out.println("   " + line));
        if (!r.listenerEvents().isEmpty()) {
          out.println("   idem listener events: " + r.listenerEvents());
        }
        out.println();
      }
    }
    if (!results.isEmpty()) {
      String format = "%-26s %-20s %-34s %4s %7s %8s  %s%n";
      out.printf(format, "scenario", "faults", "guards", "rows", "charges", "receipts", "repeats caught, by guard");
      for (RunResult r : results) {
        out.printf(format, r.scenario(), Hop.format(r.setup().faults(), true), Hop.format(r.setup().guards(), false),
            r.paymentRows(), r.charges(), r.receipts(), r.caughtText());
      }
      out.println();
      for (int i = 0; i < results.size(); i++) {
        out.println("  " + results.get(i).scenario() + ": " + options.scenarios().get(i).lesson());
      }
      out.println();
      out.println("idem's listener events per run (what a metrics adapter attached to Idem would count):");
      for (RunResult r : results) {
        String events = r.listenerEvents().entrySet().stream()
            .map(e -> e.getKey() + "=" + e.getValue()).sorted().collect(Collectors.joining(" "));
        out.printf("  %-26s %s%n", r.scenario(), events.isEmpty() ? "-" : events);
      }
      out.println();
      out.println("idem-micrometer's meters that moved, and reconciliation of " + LabSql.of(options.db()).paymentsByOrder().describe()
          + " (one intent per order), per run:");
      for (RunResult r : results) {
        out.println("  " + r.scenario());
        r.meters().forEach((meter, value) -> out.println("     " + meter + " " + value));
        out.println("     breaks: " + r.breaksText());
        out.println("     provider breaks: " + r.providerBreaksText());
      }
      out.println();
    }
    for (String tour : options.tours()) {
      out.println("-- tour " + tour + ": " + Tours.describe(tour));
      for (String line : Tours.run(tour)) {
        out.println("   " + line);
      }
      out.println();
    }
    for (RunResult r : results) {
      out.println(r.summaryLine());
      out.println(r.breaksLine());
      out.println(r.providerBreaksLine());
    }
  }

  /** Where the runs' databases are: the server of {@code vendor} this JVM's fixture uses (started now if need be). */
  static String describeServer(TestDatabase.Vendor vendor) {
    if (vendor == TestDatabase.Vendor.POSTGRESQL) {
      return describeServer(vendor, TestPostgres.server().kind());
    }
    // MariaDB's server is found when the first database is made (a server already running, or an
    // embedded one): make one, as cheap there as a schema.
    try (TestDatabase probe = TestDatabase.newDatabase("lab_probe")) {
      return describeServer(vendor, probe.kind());
    }
  }

  static String describeServer(TestDatabase.Vendor vendor, TestPostgres.Kind kind) {
    if (vendor == TestDatabase.Vendor.MARIADB) {
      String url = System.getenv("IDEM_JDBC_URL");
      boolean named = url != null && (url.trim().startsWith("jdbc:mariadb:") || url.trim().startsWith("jdbc:mysql:"));
      return switch (kind) {
        case EMBEDDED -> "embedded MariaDB (set IDEM_JDBC_URL to use your own server; one new database per run)";
        default -> (named ? "the MariaDB server at IDEM_JDBC_URL"
            : "the local MariaDB server at " + System.getProperty("idem.test.mariadb.local", "127.0.0.1:3306"))
            + " (one new database per run, dropped after)";
      };
    }
    return switch (kind) {
      case JDBC_URL -> "the server at IDEM_JDBC_URL (one new database per run, dropped after)";
      case TESTCONTAINERS -> "PostgreSQL in a Testcontainers container (one new database per run)";
      case EMBEDDED -> "embedded PostgreSQL (set IDEM_JDBC_URL to use your own server; one new database per run)";
    };
  }
}
