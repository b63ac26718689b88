package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/** The README's quick start works as printed, and the README prints what this test runs (after its imports). */
// migrate = false: the quick start migrates, as the README prints it
@IdemTest(migrate = false, poolSize = 4, sql = "CREATE TABLE payments (order_id text NOT NULL, amount int NOT NULL)")
class QuickStartTest {

  @Test
  void aRetryOfTheQuickStartReplaysAndLeavesOnePaymentRow(DataSource ds) throws Exception {
    Execution<String> first = QuickStart.pay(ds);
    Execution<String> retry = QuickStart.pay(ds); // the same key: the client's retry

    assertThat(first.applied()).isTrue();
    assertThat(retry.replayed()).isTrue();
    assertThat(retry.value()).isEqualTo("pay_o1").isEqualTo(first.value());
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT (SELECT count(*) FROM payments), (SELECT count(*) FROM idem_keys)")) {
      rs.next();
      assertThat(rs.getLong(1)).as("payment rows").isEqualTo(1);
      assertThat(rs.getLong(2)).as("key rows").isEqualTo(1);
    }
  }

  @Test
  void theReadmeShowsExactlyTheCodeThisTestRuns() throws Exception {
    Path root = Path.of("").toAbsolutePath().getParent();
    String readme = Files.readString(root.resolve("README.md"));
    String source = Files.readString(Path.of("src/test/java/dev/idem/jdbc/QuickStart.java"));

    Matcher inReadme = Pattern.compile("<!-- quick-start:begin[^\\n]*\\n```java\\n(.*?)```\\n<!-- quick-start:end", Pattern.DOTALL).matcher(readme);
    Matcher inSource = Pattern.compile("// quick-start:begin\\n(.*?)\\n\\s*// quick-start:end", Pattern.DOTALL).matcher(source);
    assertThat(inReadme.find()).as("README quick-start block").isTrue();
    assertThat(inSource.find()).as("QuickStart.java quick-start region").isTrue();
    // The README's block starts with its imports (DocsSnippetsTest compiles it); QuickStart.java has them at its top.
    String readmeStatements = inReadme.group(1).lines().filter(l -> !l.startsWith("import ")).collect(Collectors.joining("\n"));
    assertThat(normalise(readmeStatements)).isEqualTo(normalise(inSource.group(1)));
  }

  private static String normalise(String code) {
    List<String> lines = code.lines().map(String::strip).filter(l -> !l.isEmpty()).collect(Collectors.toList());
    return String.join("\n", lines);
  }
}
