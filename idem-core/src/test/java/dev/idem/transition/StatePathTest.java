package dev.idem.transition;

import static dev.idem.transition.Outcome.ALREADY_DONE;
import static dev.idem.transition.Outcome.APPLIED;
import static dev.idem.transition.Outcome.CONFLICT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The seed's shipment walkthrough (step 3), step by step. {@link Orders} stands in for a table: its
 * {@code compareAndSet} is one statement, {@code UPDATE orders SET status = :to, version = version
 * + 1 WHERE id = :id AND status = :from}, and on zero rows {@link #advance} reads where the row is
 * and lets {@link StatePath#classify} say what zero rows meant.
 */
class StatePathTest {

  static final StatePath SHIPMENT = StatePath.of("PLACED", "PACKED", "SHIPPED", "DELIVERED");

  record Row(String status, int version) {}

  /** One table, applied atomically per row, as the database does. */
  static final class Orders {
    private final Map<String, Row> rows = new HashMap<>();

    synchronized void insert(String id, String status) {
      rows.put(id, new Row(status, 1));
    }

    /** {@code UPDATE ... WHERE id = :id AND status = :from}; true when one row matched. */
    synchronized boolean compareAndSet(String id, String from, String to) {
      Row row = rows.get(id);
      if (row == null || !row.status().equals(from)) {
        return false; // zero rows matched
      }
      rows.put(id, new Row(to, row.version() + 1));
      return true;
    }

    /** {@code UPDATE orders SET status = :to WHERE id = :id}: no guard. */
    synchronized void blindSet(String id, String to) {
      Row row = rows.get(id);
      rows.put(id, new Row(to, row.version() + 1));
    }

    synchronized Row row(String id) {
      return rows.get(id);
    }
  }

  Orders db;

  @BeforeEach
  void newTable() {
    db = new Orders();
  }

  Outcome advance(String id, String from, String to) {
    if (db.compareAndSet(id, from, to)) {
      return APPLIED;
    }
    Row now = db.row(id);
    return SHIPMENT.classify(now == null ? null : now.status(), to);
  }

  @Test
  void theShipmentWalkthrough() {
    db.insert("o1", "PLACED");
    assertThat(advance("o1", "PLACED", "PACKED")).isEqualTo(APPLIED);
    assertThat(db.row("o1")).isEqualTo(new Row("PACKED", 2));
    // The queue redelivers the warehouse message after a consumer crash.
    assertThat(advance("o1", "PLACED", "PACKED")).isEqualTo(ALREADY_DONE);
    assertThat(db.row("o1")).isEqualTo(new Row("PACKED", 2)); // the repeat changed nothing
    assertThat(advance("o1", "PACKED", "SHIPPED")).isEqualTo(APPLIED); // carrier webhook
    assertThat(advance("o1", "PACKED", "SHIPPED")).isEqualTo(ALREADY_DONE); // sent again
    assertThat(db.row("o1")).isEqualTo(new Row("SHIPPED", 3));
    assertThat(advance("o1", "SHIPPED", "DELIVERED")).isEqualTo(APPLIED);
    // A delayed copy of the first message arrives last. The condition keeps the order DELIVERED.
    assertThat(advance("o1", "PLACED", "PACKED")).isEqualTo(ALREADY_DONE);
    // Three changes, three repeats ignored: DELIVERED at version 4.
    assertThat(db.row("o1")).isEqualTo(new Row("DELIVERED", 4));
  }

  @Test
  void twoWorkersOnOneMessageGiveAppliedThenAlreadyDone() {
    // Both read PLACED; the database runs their UPDATEs one after the other, so one matches.
    db.insert("o2", "PLACED");
    Outcome first = advance("o2", "PLACED", "PACKED");
    Outcome second = advance("o2", "PLACED", "PACKED");
    assertThat(first + " " + second).isEqualTo("APPLIED ALREADY_DONE");
    assertThat(db.row("o2")).isEqualTo(new Row("PACKED", 2));
  }

  @Test
  void aCancelledOrderIsAConflictNotASuccess() {
    db.insert("o3", "CANCELLED");
    Outcome outcome = advance("o3", "PLACED", "PACKED");
    assertThat(outcome).isEqualTo(CONFLICT);
    assertThat(outcome.isSuccess()).isFalse();
    assertThat(db.row("o3")).isEqualTo(new Row("CANCELLED", 1)); // do not pack a cancelled order
  }

  @Test
  void aStepThatArrivesBeforeTheOneItFollowsIsAConflict() {
    db.insert("o4", "PLACED");
    assertThat(advance("o4", "SHIPPED", "DELIVERED")).isEqualTo(CONFLICT); // not shipped yet
    assertThat(db.row("o4")).isEqualTo(new Row("PLACED", 1));
  }

  @Test
  void noRowAtAllIsAConflict() {
    assertThat(advance("missing", "PLACED", "PACKED")).isEqualTo(CONFLICT);
  }

  @Test
  void aBlindWriteMovesADeliveredOrderBackWhichTheConditionPrevents() {
    db.insert("o1", "PLACED");
    advance("o1", "PLACED", "PACKED");
    advance("o1", "PACKED", "SHIPPED");
    advance("o1", "SHIPPED", "DELIVERED");
    assertThat(db.row("o1").status()).isEqualTo("DELIVERED");

    // The late first message, through the conditional write: nothing moves, and it is a success.
    assertThat(advance("o1", "PLACED", "PACKED")).isEqualTo(ALREADY_DONE);
    assertThat(db.row("o1")).isEqualTo(new Row("DELIVERED", 4));

    // The same late message, written blind: "idempotent" for one message repeated, and still wrong.
    db.blindSet("o1", "PACKED");
    assertThat(db.row("o1").status()).isEqualTo("PACKED");
  }

  @Test
  void twoRacingThreadsOnOneRowGiveOneApplied() throws Exception {
    db.insert("o5", "PLACED");
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(8);
    try {
      List<Future<Outcome>> results = new ArrayList<>();
      for (int i = 0; i < 8; i++) {
        results.add(pool.submit(() -> {
          start.await();
          return advance("o5", "PLACED", "PACKED");
        }));
      }
      start.countDown();
      List<Outcome> outcomes = new ArrayList<>();
      for (var f : results) {
        outcomes.add(f.get());
      }
      assertThat(outcomes).containsOnlyOnce(APPLIED);
      assertThat(outcomes).filteredOn(o -> o == ALREADY_DONE).hasSize(7);
      assertThat(db.row("o5")).isEqualTo(new Row("PACKED", 2));
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aSideStateTargetIsAlreadyDoneOnlyWhenTheRowIsInIt() {
    assertThat(SHIPMENT.classify("CANCELLED", "CANCELLED")).isEqualTo(ALREADY_DONE); // cancel, repeated
    assertThat(SHIPMENT.classify("DELIVERED", "CANCELLED")).isEqualTo(CONFLICT);
    assertThat(SHIPMENT.classify("PLACED", "CANCELLED")).isEqualTo(CONFLICT);
  }

  @Test
  void aPathIsValidatedAndComparable() {
    assertThat(SHIPMENT.states()).containsExactly("PLACED", "PACKED", "SHIPPED", "DELIVERED");
    assertThat(SHIPMENT.contains("SHIPPED")).isTrue();
    assertThat(SHIPMENT.contains("CANCELLED")).isFalse();
    assertThat(SHIPMENT).isEqualTo(StatePath.of("PLACED", "PACKED", "SHIPPED", "DELIVERED"));
    assertThat(SHIPMENT).isNotEqualTo(StatePath.of("PLACED", "SHIPPED", "PACKED", "DELIVERED"));
    assertThat(SHIPMENT).hasToString("PLACED → PACKED → SHIPPED → DELIVERED");
    assertThatThrownBy(() -> SHIPMENT.states().add("LOST")).isInstanceOf(UnsupportedOperationException.class);

    assertThatThrownBy(() -> StatePath.of()).hasMessage("a state path needs at least one state");
    assertThatThrownBy(() -> StatePath.of((String[]) null)).hasMessage("a state path needs at least one state");
    assertThatThrownBy(() -> StatePath.of("A", null)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("state at position 1 is null");
    assertThatThrownBy(() -> StatePath.of("A", " ")).hasMessage("state at position 1 is blank");
    assertThatThrownBy(() -> StatePath.of("A", "B", "A")).hasMessage("state A appears twice on the path [A, B, A]");
    assertThatThrownBy(() -> SHIPMENT.classify("PLACED", null)).hasMessage("target state must not be null");
  }

  @Test
  void thePathIsCopied() {
    String[] states = {"A", "B"};
    StatePath path = StatePath.of(states);
    states[1] = "Z";
    assertThat(path.states()).containsExactly("A", "B");
  }
}
