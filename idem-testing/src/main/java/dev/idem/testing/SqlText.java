package dev.idem.testing;

import java.util.regex.Pattern;

/** What {@link FaultyDataSource} reads from the SQL a service sends: where its commits are. */
final class SqlText {
  /** Quoted text and dollar-quoted bodies, whose words are no commands. */
  private static final Pattern QUOTED = Pattern.compile("(?s)'(?:[^']|'')*'|\\$([A-Za-z_]\\w*|)\\$.*?\\$\\1\\$");
  private static final Pattern ENDS_IN_COMMIT = Pattern.compile(
      "(?is)(?:^|;)\\s*(?:COMMIT|END)(?:\\s+(?:WORK|TRANSACTION))?(?:\\s+AND\\s+NO\\s+CHAIN)?$");
  private static final Pattern ONLY_COMMIT = Pattern.compile("(?is)^(?:COMMIT|END)(?:\\s+(?:WORK|TRANSACTION))?$");
  /**
   * Commands that end or begin a transaction themselves, or cannot run inside one: a statement
   * holding one is never run in a transaction of the kit's.
   */
  private static final Pattern OWN_TRANSACTION = Pattern.compile("(?is)(?:^|;)\\s*(?:BEGIN|START\\s+TRANSACTION|COMMIT|END"
      + "|ROLLBACK|ABORT|PREPARE\\s+TRANSACTION|VACUUM|REINDEX|CLUSTER|(?:CREATE|DROP|ALTER)\\s+(?:DATABASE|TABLESPACE|SYSTEM|SUBSCRIPTION))\\b"
      + "|\\bCONCURRENTLY\\b");

  private SqlText() {}

  /** Whether the SQL string's last command commits (e.g. idem's one-round-trip {@code claim; effect; COMMIT}). */
  static boolean endsInCommit(String sql) {
    return ENDS_IN_COMMIT.matcher(trimmed(sql)).find();
  }

  /** Whether the string is {@code COMMIT} alone. */
  static boolean onlyCommit(String sql) {
    return ONLY_COMMIT.matcher(trimmed(sql)).matches();
  }

  /** Whether the string may run inside a transaction the kit opens around it. */
  static boolean fitsInATransaction(String sql) {
    return !OWN_TRANSACTION.matcher(QUOTED.matcher(sql).replaceAll("''")).find();
  }

  /** The start of the SQL on one line, for the report. */
  static String snippet(String sql) {
    return Require.shorten(sql.replaceAll("\\s+", " ").trim(), 48);
  }

  private static String trimmed(String sql) {
    String t = QUOTED.matcher(sql).replaceAll("''").strip();
    while (t.endsWith(";")) {
      t = t.substring(0, t.length() - 1).strip();
    }
    return t;
  }
}
