package dev.idem.jdbc.reconcile;

import dev.idem.event.IdemListener;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Identifiers;
import dev.idem.jdbc.tx.RetryBudget;
import dev.idem.jdbc.tx.TransactionBinding;
import java.io.PrintStream;
import java.time.Duration;
import java.util.Locale;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * Reconciliation from the command line, for a daily job:
 *
 * <pre>
 * java -cp ... dev.idem.jdbc.reconcile.ReconcileCommand --url jdbc:postgresql://host/db?user=u \
 *     --table payments --key-column order_key [--scope shop] [--schema idem] [--effect-schema public]
 *     [--sample 20] [--record]
 * </pre>
 *
 * The URL is PostgreSQL's or MariaDB's ({@code jdbc:mariadb://host/db?user=u}: idem's tables in
 * that database unless {@code --schema} names another; MariaDB Connector/J, {@code
 * org.mariadb.jdbc:mariadb-java-client}, on the class path). Prints the findings; {@code --record}
 * also writes them to {@code idem_breaks}. Exit code 0 when clean, 1 when breaks were found, 2 on
 * bad arguments (with the usage) or a failed check.
 */
public final class ReconcileCommand {
  static final String USAGE = "usage: ReconcileCommand --url jdbc:postgresql://host:port/db?user=...|jdbc:mariadb://..."
      + " --table TABLE"
      + " --key-column COLUMN [--scope SCOPE] [--schema IDEM_SCHEMA] [--effect-schema SCHEMA] [--sample N] [--record]";

  private ReconcileCommand() {}

  public static void main(String[] args) {
    System.exit(run(args, System.out, System.err));
  }

  /** Runs the command; returns its exit code (0 clean, 1 breaks, 2 bad arguments or failure). */
  static int run(String[] args, PrintStream out, PrintStream err) {
    String url = null;
    String table = null;
    String keyColumn = null;
    String scope = null;
    String schema = null; // idem's default: schema "idem" on PostgreSQL, the URL's database on MariaDB
    String effectSchema = null;
    int sample = EffectTable.DEFAULT_SAMPLE;
    boolean record = false;
    EffectTable target;
    try {
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (a.equals("--record")) {
          record = true;
          continue;
        }
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException(a + " needs a value or is unknown");
        }
        String v = args[++i];
        switch (a) {
          case "--url" -> url = v;
          case "--table" -> table = v;
          case "--key-column" -> keyColumn = v;
          case "--scope" -> scope = v;
          case "--schema" -> schema = v;
          case "--effect-schema" -> effectSchema = v;
          case "--sample" -> sample = Integer.parseInt(v);
          default -> throw new IllegalArgumentException("unknown argument " + a);
        }
      }
      if (url == null || !(url.startsWith(POSTGRESQL) || url.startsWith(MARIADB))) {
        throw new IllegalArgumentException("--url " + POSTGRESQL + "//... or " + MARIADB + "//... is required");
      }
      if (table == null || keyColumn == null) {
        throw new IllegalArgumentException("--table and --key-column are required");
      }
      if (schema != null) {
        Identifiers.check("--schema", schema);
        if (!schema.equals(schema.toLowerCase(Locale.ROOT))) {
          throw new IllegalArgumentException("--schema must be lower case, as idem's migrations create it");
        }
      }
      target = new EffectTable(effectSchema, table, keyColumn, scope, sample);
    } catch (IllegalArgumentException e) { // NumberFormatException included
      err.println("bad arguments: " + e.getMessage());
      err.println(USAGE);
      return 2;
    }
    try {
      // Built over the context directly: this package must not depend on the entry point (a cycle).
      Context context = new Context(dataSource(url), schema, IdemListener.NONE, TransactionBinding.NONE, RetryBudget.DEFAULT,
          Duration.ZERO);
      Reconciliation reconciliation = new Reconciliation(context);
      Findings f = reconciliation.check(target);
      print(f, out);
      if (record) {
        String breaks = schema != null ? schema + ".idem_breaks"
            : context.mariadb() ? "idem_breaks of the URL's database" : Context.DEFAULT_SCHEMA + ".idem_breaks";
        out.println("recorded " + reconciliation.record(f) + " break row(s) in " + breaks);
      }
      return f.clean() ? 0 : 1;
    } catch (RuntimeException e) {
      err.println("reconciliation failed: " + e.getMessage());
      return 2;
    }
  }

  private static final String POSTGRESQL = "jdbc:postgresql:";
  private static final String MARIADB = "jdbc:mariadb:";

  /**
   * A DataSource of the URL's driver. MariaDB's is an optional dependency, found by name (so that
   * PostgreSQL's users need none, and this module does not read its module).
   */
  private static DataSource dataSource(String url) {
    if (url.startsWith(MARIADB)) {
      try {
        return (DataSource) Class.forName("org.mariadb.jdbc.MariaDbDataSource").getConstructor(String.class).newInstance(url);
      } catch (ClassNotFoundException e) {
        throw new IllegalStateException("a " + MARIADB + " URL needs MariaDB Connector/J on the class path"
            + " (org.mariadb.jdbc:mariadb-java-client)", e);
      } catch (java.lang.reflect.InvocationTargetException e) {
        throw new IllegalArgumentException("--url: " + e.getCause().getMessage(), e.getCause());
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException("could not make MariaDB Connector/J's DataSource: " + e, e);
      }
    }
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setUrl(url);
    return ds;
  }

  static void print(Findings f, PrintStream out) {
    out.println("reconciliation of " + f.target().describe() + (f.target().scope() == null ? "" : " (scope " + f.target().scope() + ")")
        + " at " + f.checkedAt() + ": " + (f.clean() ? "clean" : "BREAKS"));
    f.duplicates().forEach(d -> out.println("  duplicate effect: key " + d.key() + ", " + d.effects() + " effects"));
    if (f.effectsWithoutKey() > 0) {
      out.println("  effects without key: " + f.effectsWithoutKey() + ", e.g. rows " + f.effectsWithoutKeySample());
    }
    f.keysWithoutEffect().forEach(k -> out.println("  key without effect: " + k));
    if (f.unknownOutcomes().count() > 0) {
      out.println("  unknown outcomes: " + f.unknownOutcomes().count() + ", oldest lease ended " + f.unknownOutcomes().oldest() + " ago");
      f.unknownSample().forEach(s -> out.println("    " + s.key() + " fence " + s.fence() + " call key " + s.callKey()));
    }
    f.provider().ifPresent(p -> {
      out.println("  provider: " + p.effects() + " effects from " + p.from() + " to " + p.to() + ": " + (p.clean() ? "clean" : "BREAKS"));
      p.duplicates().forEach(d -> out.println("    provider duplicate: intent " + d.intent() + ", " + d.effects().size()
          + " effects, amount " + d.amount() + " " + d.effects().stream().map(ProviderEffect::id).toList()));
      p.effectsWithoutKey().forEach(e -> out.println("    provider effect without key: " + e.id() + " amount " + e.amount()
          + " call key " + e.callKey() + " reference " + e.reference()));
      p.keysUnseen().forEach(k -> out.println("    key without provider effect: " + k.key() + " call key " + k.callKey()));
    });
  }
}
