package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.idem.key.KeyReuseException;
import dev.idem.result.InFlightException;
import dev.idem.spring.IdempotencyKey;
import dev.idem.spring.Idempotent;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Race;
import dev.idem.testing.TestDatabase;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.springframework.aop.Advisor;
import org.springframework.aop.framework.Advised;
import org.springframework.aop.support.AopUtils;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.annotation.EnableTransactionManagement;
import org.springframework.transaction.annotation.Isolation;
import org.springframework.transaction.annotation.Propagation;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.interceptor.BeanFactoryTransactionAttributeSourceAdvisor;
import org.springframework.transaction.support.TransactionTemplate;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code @Idempotent} on a service method, in a real context on the run's database: one effect row
 * per key across repeats and racing copies, the stored value returned, another request under the
 * key refused, the method's exception rolling the key back, and bad annotations stopping start-up.
 */
@IdemTest(sql = {"CREATE TABLE charges (id text NOT NULL, amount int NOT NULL)",
    "CREATE TABLE isolated (id text NOT NULL, isolation text NOT NULL, key_seen_outside bigint NOT NULL)"})
class IdempotentMethodsTest {
  final TestDatabase db;

  IdempotentMethodsTest(TestDatabase db) {
    this.db = db;
  }

  record Order(String id, int amount) {}

  record Receipt(String id, int amount, String reference) {}

  /** A checked exception of the application's. */
  static class Declined extends Exception {
    Declined(String message) {
      super(message);
    }
  }

  /** What the service did, in a bean of its own: a test cannot read a proxied bean's fields. */
  static class Ledger {
    final AtomicInteger runs = new AtomicInteger();
    volatile boolean decline;
    volatile CountDownLatch entered = new CountDownLatch(1);
    volatile CountDownLatch release = new CountDownLatch(0);
  }

  static class Payments {
    final JdbcTemplate jdbc;
    final Ledger ledger;
    final AtomicInteger runs;

    Payments(JdbcTemplate jdbc, Ledger ledger) {
      this.jdbc = jdbc;
      this.ledger = ledger;
      this.runs = ledger.runs;
    }

    @Idempotent(key = "#order.id")
    public Receipt pay(Order order) {
      runs.incrementAndGet();
      jdbc.update("INSERT INTO charges VALUES (?, ?)", order.id(), order.amount());
      return new Receipt(order.id(), order.amount(), UUID.randomUUID().toString());
    }

    @Idempotent(scope = "refunds", window = "${refunds.window:2h}")
    public List<Receipt> refund(@IdempotencyKey String id, int amount) throws Declined {
      runs.incrementAndGet();
      jdbc.update("INSERT INTO charges VALUES (?, ?)", id, -amount);
      if (ledger.decline) {
        throw new Declined("the bank said no");
      }
      return List.of(new Receipt(id, -amount, UUID.randomUUID().toString()));
    }

    @Idempotent
    public void note(@IdempotencyKey String id, Map<String, Object> details) {
      runs.incrementAndGet();
      jdbc.update("INSERT INTO charges VALUES (?, ?)", id, details.size());
    }

    @Idempotent(key = "#p0")
    public String held(String id) throws InterruptedException {
      runs.incrementAndGet();
      jdbc.update("INSERT INTO charges VALUES (?, 0)", id);
      ledger.entered.countDown();
      assertThat(ledger.release.await(30, TimeUnit.SECONDS)).isTrue();
      return "held " + id;
    }

    @Idempotent(key = "#order?.id")
    public String nullable(Order order) {
      return "ran";
    }

    @Idempotent(key = "#p0")
    public String basket(String id, Basket basket) {
      runs.incrementAndGet();
      jdbc.update("INSERT INTO charges VALUES (?, ?)", id, basket.itemCount());
      return "basket " + id;
    }

    @Idempotent(key = "#p0")
    public String plain(Thing thing) {
      runs.incrementAndGet();
      jdbc.update("INSERT INTO charges VALUES (?, 0)", thing.getId());
      return "plain";
    }

    @Idempotent(key = "#p0.id")
    public String byId(Thing thing) {
      runs.incrementAndGet();
      jdbc.update("INSERT INTO charges VALUES (?, 0)", thing.getId());
      return "by id";
    }

    @Idempotent(key = "#p0")
    public String byRecord(OrderId id) {
      runs.incrementAndGet();
      jdbc.update("INSERT INTO charges VALUES (?, 0)", id.value());
      return "by record";
    }
  }

  /** Two words in a field: an application mapper in snake_case writes it otherwise. */
  record Basket(String customerId, int itemCount) {}

  /** A key whose text is Object's toString(): a new key every call. */
  static class Thing {
    private final String id;

    Thing(String id) {
      this.id = id;
    }

    public String getId() {
      return id;
    }
  }

  /** A one-field record: its toString() is a valid key ("OrderId[value=...]"). */
  record OrderId(String value) {}

  /** A generic base class whose {@code T} the bean's class names. */
  abstract static class Maker<T> {
    final JdbcTemplate jdbc;

    Maker(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    @Idempotent(key = "#p0")
    public T make(String id) {
      jdbc.update("INSERT INTO charges VALUES (?, 1)", id);
      return create(id);
    }

    abstract T create(String id);
  }

  static class ReceiptMaker extends Maker<Receipt> {
    ReceiptMaker(JdbcTemplate jdbc) {
      super(jdbc);
    }

    @Override
    Receipt create(String id) {
      return new Receipt(id, 1, UUID.randomUUID().toString());
    }
  }

  static class OrderMaker extends Maker<List<Order>> {
    OrderMaker(JdbcTemplate jdbc) {
      super(jdbc);
    }

    @Override
    List<Order> create(String id) {
      return List.of(new Order(id, (int) (Math.random() * 1000)));
    }
  }

  /** The test's database, as a bean (not itself: the context would close it, dropping the database). */
  record Outside(TestDatabase db) {}

  /**
   * @Transactional and @Idempotent on one method: its isolation is the transaction's. It records
   * that isolation, and whether another connection sees its key yet (not while the transaction
   * that claimed it is open).
   */
  static class Isolated {
    final JdbcTemplate jdbc;
    final TestDatabase outside;

    Isolated(JdbcTemplate jdbc, Outside outside) {
      this.jdbc = jdbc;
      this.outside = outside.db();
    }

    @Transactional(isolation = Isolation.SERIALIZABLE)
    @Idempotent(key = "#p0")
    public String pay(String id) {
      String isolation = jdbc.queryForObject(Vendors.sql(outside, "SELECT current_setting('transaction_isolation')",
          "SELECT lower(@@tx_isolation)"), String.class);
      long keySeenOutside = outside.count("SELECT count(*) FROM idem_keys WHERE scope = ? AND idem_keys.key = ?",
          Isolated.class.getName() + ".pay", id);
      jdbc.update("INSERT INTO isolated VALUES (?, ?, ?)", id, isolation, keySeenOutside);
      return "paid " + id;
    }
  }

  @RestController
  static class Handlers {
    @Idempotent
    @PostMapping("/x")
    public String handle() {
      return "x";
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class App {
    @Bean
    Ledger ledger() {
      return new Ledger();
    }

    @Bean
    Payments payments(JdbcTemplate jdbc, Ledger ledger) {
      return new Payments(jdbc, ledger);
    }

    @Bean
    Handlers handlers() {
      return new Handlers();
    }
  }

  ApplicationContextRunner runner() {
    return IdemAutoConfigurationTest.runner(db).withUserConfiguration(App.class);
  }

  long charges(String id) {
    return db.count("SELECT count(*) FROM charges WHERE id = ?", id);
  }

  long keys(String scope, String id) {
    return db.count("SELECT count(*) FROM idem_keys WHERE scope = ? AND idem_keys.key = ?", scope, id);
  }

  static final String PAY_SCOPE = Payments.class.getName() + ".pay";

  @Test
  void aRepeatReturnsTheStoredValueWithoutRunningAndOtherArgumentsAreRefused() {
    runner().run(ctx -> {
      assertThat(ctx).hasNotFailed();
      Payments payments = ctx.getBean(Payments.class);
      Ledger ledger = ctx.getBean(Ledger.class);
      assertThat(AopUtils.isAopProxy(payments)).isTrue();
      String id = "order-" + UUID.randomUUID();
      Receipt first = payments.pay(new Order(id, 100));
      Receipt again = payments.pay(new Order(id, 100));
      assertThat(again).isEqualTo(first); // the stored receipt, its random reference included
      assertThat(ledger.runs).hasValue(1);
      assertThat(charges(id)).isEqualTo(1);
      assertThat(keys(PAY_SCOPE, id)).isEqualTo(1);

      assertThatThrownBy(() -> payments.pay(new Order(id, 999))).isInstanceOf(KeyReuseException.class);
      assertThat(charges(id)).isEqualTo(1);
      assertThat(ledger.runs).hasValue(1);
    });
  }

  @Test
  void racingCopiesOnRealThreadsMakeOneEffect() {
    runner().run(ctx -> {
      Payments payments = ctx.getBean(Payments.class);
      Ledger ledger = ctx.getBean(Ledger.class);
      String id = "race-" + UUID.randomUUID();
      List<Receipt> receipts = Race.together(8, i -> payments.pay(new Order(id, 5)));
      assertThat(receipts).hasSize(8).allSatisfy(r -> assertThat(r).isEqualTo(receipts.get(0)));
      assertThat(ledger.runs).hasValue(1);
      assertThat(charges(id)).isEqualTo(1);
      assertThat(keys(PAY_SCOPE, id)).isEqualTo(1);
    });
  }

  @Test
  void theMethodsCheckedExceptionKeepsItsTypeAndRollsTheKeyBackThenARetryRuns() {
    runner().run(ctx -> {
      Payments payments = ctx.getBean(Payments.class);
      Ledger ledger = ctx.getBean(Ledger.class);
      String id = "refund-" + UUID.randomUUID();
      ledger.decline = true;
      assertThatThrownBy(() -> payments.refund(id, 7)).isExactlyInstanceOf(Declined.class).hasMessage("the bank said no");
      assertThat(charges(id)).isZero();
      assertThat(keys("refunds", id)).isZero();

      ledger.decline = false;
      List<Receipt> refunded = payments.refund(id, 7);
      List<Receipt> replayed = payments.refund(id, 7);
      assertThat(replayed).isEqualTo(refunded); // List<Receipt>: the generic return type, decoded as such
      assertThat(replayed.get(0)).isInstanceOf(Receipt.class);
      assertThat(ledger.runs).hasValue(2);
      assertThat(charges(id)).isEqualTo(1);
      assertThat(keys("refunds", id)).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'refunds' AND idem_keys.key = ?"
          + " AND " + Vendors.windowIs(db, Duration.ofHours(2)), id)).as("the window from the placeholder's default").isEqualTo(1);
    });
  }

  @Test
  void aVoidMethodRunsOnceAndTheFingerprintIgnoresFieldOrder() {
    runner().run(ctx -> {
      Payments payments = ctx.getBean(Payments.class);
      Ledger ledger = ctx.getBean(Ledger.class);
      String id = "note-" + UUID.randomUUID();
      Map<String, Object> ab = new LinkedHashMap<>();
      ab.put("a", 1);
      ab.put("b", Map.of("x", 1, "y", 2));
      Map<String, Object> ba = new LinkedHashMap<>();
      ba.put("b", Map.of("y", 2, "x", 1));
      ba.put("a", 1);
      payments.note(id, ab);
      payments.note(id, ba);
      assertThat(ledger.runs).hasValue(1);
      assertThat(charges(id)).isEqualTo(1);
      assertThat(keys(Payments.class.getName() + ".note", id)).isEqualTo(1);
      assertThatThrownBy(() -> payments.note(id, Map.of("a", 2))).isInstanceOf(KeyReuseException.class);
    });
  }

  @Test
  void aCopyStillInFlightAfterTheWaitGetsInFlightException() {
    runner().run(ctx -> {
      Payments payments = ctx.getBean(Payments.class);
      Ledger ledger = ctx.getBean(Ledger.class);
      String id = "held-" + UUID.randomUUID();
      ledger.entered = new CountDownLatch(1);
      ledger.release = new CountDownLatch(1);
      CompletableFuture<String> first = CompletableFuture.supplyAsync(() -> {
        try {
          return payments.held(id);
        } catch (InterruptedException e) {
          throw new IllegalStateException(e);
        }
      });
      try {
        assertThat(ledger.entered.await(30, TimeUnit.SECONDS)).isTrue();
        assertThatThrownBy(() -> payments.held(id)).isInstanceOf(InFlightException.class);
      } finally {
        ledger.release.countDown();
      }
      assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo("held " + id);
      assertThat(payments.held(id)).isEqualTo("held " + id);
      assertThat(ledger.runs).hasValue(1);
      assertThat(charges(id)).isEqualTo(1);
    });
  }

  @Test
  void insideASpringTransactionTheKeyRollsBackWithIt() {
    runner().run(ctx -> {
      Payments payments = ctx.getBean(Payments.class);
      Ledger ledger = ctx.getBean(Ledger.class);
      TransactionTemplate tx = ctx.getBean(TransactionTemplate.class);
      String id = "joined-" + UUID.randomUUID();
      tx.executeWithoutResult(status -> {
        payments.pay(new Order(id, 3));
        status.setRollbackOnly();
      });
      assertThat(charges(id)).isZero();
      assertThat(keys(PAY_SCOPE, id)).isZero();
      tx.executeWithoutResult(status -> payments.pay(new Order(id, 3)));
      assertThat(charges(id)).isEqualTo(1);
      assertThat(keys(PAY_SCOPE, id)).isEqualTo(1);
    });
  }

  @Test
  void aNullKeyIsRefusedNamingTheMethodAndTheAttribute() {
    runner().run(ctx -> {
      Payments payments = ctx.getBean(Payments.class);
      Ledger ledger = ctx.getBean(Ledger.class);
      assertThatThrownBy(() -> payments.nullable(null)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("Payments.nullable(Order)").hasMessageContaining("key = \"#order?.id\" gave null");
    });
  }

  @Test
  void controllersAreLeftToTheHttpFilterAndThePropertyTurnsTheAdviceOff() {
    runner().run(ctx -> assertThat(AopUtils.isAopProxy(ctx.getBean(Handlers.class))).isFalse());
    runner().withPropertyValues("idem.aop.enabled=false")
        .run(ctx -> assertThat(AopUtils.isAopProxy(ctx.getBean(Payments.class))).isFalse());
  }

  static class NoKey {
    @Idempotent
    public String pay(String id) {
      return id;
    }
  }

  static class TwoKeys {
    @Idempotent
    public String pay(@IdempotencyKey String a, @IdempotencyKey String b) {
      return a;
    }
  }

  static class BadSpel {
    @Idempotent(key = "#order.(")
    public String pay(Order order) {
      return "x";
    }
  }

  static class BadWindow {
    @Idempotent(key = "#p0", window = "${pay.window:soon}")
    public String pay(String id) {
      return id;
    }
  }

  static class PlainKeyParameter {
    @Idempotent
    public String pay(@IdempotencyKey Thing thing) {
      return "x";
    }
  }

  static class TypeInKey {
    @Idempotent(key = "T(java.lang.System).getProperty('user.name')")
    public String pay(String id) {
      return id;
    }
  }

  static class BeanInKey {
    @Idempotent(key = "@payments.toString()")
    public String pay(String id) {
      return id;
    }
  }

  static class OpenMaker<T> extends Maker<T> {
    OpenMaker(JdbcTemplate jdbc) {
      super(jdbc);
    }

    @Override
    T create(String id) {
      return null;
    }
  }

  static class ReadOnly {
    @Transactional(readOnly = true)
    @Idempotent(key = "#p0")
    public String pay(String id) {
      return id;
    }
  }

  static class RequiresNew {
    @Transactional(propagation = Propagation.REQUIRES_NEW)
    @Idempotent(key = "#p0")
    public String pay(String id) {
      return id;
    }
  }

  static class Async {
    @Idempotent(key = "#p0")
    public CompletableFuture<String> pay(String id) {
      return CompletableFuture.completedFuture(id);
    }
  }

  @Test
  void badAnnotationsStopStartUpNamingTheMethodAndTheAttribute() {
    Object[][] cases = {
        {NoKey.class, "@Idempotent on NoKey.pay(String): no key"},
        {TwoKeys.class, "@Idempotent on TwoKeys.pay(String, String): parameters 0 and 1 are both marked @IdempotencyKey"},
        {BadSpel.class, "@Idempotent on BadSpel.pay(Order): key = \"#order.(\" is not a valid SpEL expression"},
        {BadWindow.class, "@Idempotent on BadWindow.pay(String): window = \"${pay.window:soon}\" (\"soon\") is not a duration"},
        {Async.class, "@Idempotent on Async.pay(String): it returns a CompletableFuture"},
        {PlainKeyParameter.class, "@Idempotent on PlainKeyParameter.pay(Thing): the @IdempotencyKey parameter 0 is a"
            + " dev.idem.spring.boot.IdempotentMethodsTest$Thing, which does not declare toString()"},
        {TypeInKey.class, "@Idempotent on TypeInKey.pay(String): key = \"T(java.lang.System).getProperty('user.name')\""
            + " names a type (T(...))"},
        {BeanInKey.class, "@Idempotent on BeanInKey.pay(String): key = \"@payments.toString()\" names a type"},
        {OpenMaker.class, "@Idempotent on OpenMaker.make(String): its return type T leaves T unresolved"},
        {ReadOnly.class, "@Idempotent on ReadOnly.pay(String): @Transactional(readOnly = true)"},
        {RequiresNew.class, "@Idempotent on RequiresNew.pay(String): @Transactional(propagation = REQUIRES_NEW)"},
    };
    for (Object[] c : cases) {
      @SuppressWarnings("unchecked")
      Class<Object> type = (Class<Object>) c[0];
      IdemAutoConfigurationTest.runner(db).withBean(type, () -> newBean(type))
          .run(ctx -> {
            assertThat(ctx).hasFailed().getFailure().hasStackTraceContaining((String) c[1]);
            // What Boot prints instead of the stack trace: the finding, then the fix.
            FailureAnalysis analysis = IdemHttpScopeTest.analysis(ctx.getStartupFailure());
            assertThat(analysis.getDescription()).contains((String) c[1]);
            assertThat(analysis.getAction()).isNotBlank();
          });
    }
  }

  /** {@code type}, made with a JdbcTemplate if it takes one (nothing is called on it here). */
  static Object newBean(Class<?> type) {
    try {
      var constructor = type.getDeclaredConstructors()[0];
      constructor.setAccessible(true);
      return constructor.getParameterCount() == 0 ? constructor.newInstance() : constructor.newInstance(new JdbcTemplate());
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(e);
    }
  }

  @Test
  void aKeyWhoseTextIsObjectsToStringIsRefusedAtTheCallAndOthersRepeat() {
    runner().run(ctx -> {
      Payments payments = ctx.getBean(Payments.class);
      Ledger ledger = ctx.getBean(Ledger.class);
      String id = "thing-" + UUID.randomUUID();
      assertThatThrownBy(() -> payments.plain(new Thing(id))).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("@Idempotent on Payments.plain(Thing): key = \"#p0\" is a")
          .hasMessageContaining("does not declare toString()");
      assertThat(charges(id)).isZero();
      assertThat(ledger.runs).hasValue(0);

      payments.byId(new Thing(id));
      payments.byId(new Thing(id));
      assertThat(charges(id)).isEqualTo(1);

      String value = "rec-" + UUID.randomUUID();
      payments.byRecord(new OrderId(value));
      payments.byRecord(new OrderId(value));
      assertThat(charges(value)).isEqualTo(1);
      assertThat(keys(Payments.class.getName() + ".byRecord", "OrderId[value=" + value + "]")).isEqualTo(1);
      assertThat(ledger.runs).hasValue(2);
    });
  }

  @Test
  void aGenericBaseClassesReturnTypeIsTheBeanClassesOnARepeat() {
    IdemAutoConfigurationTest.runner(db)
        .withBean(ReceiptMaker.class)
        .withBean(OrderMaker.class)
        .run(ctx -> {
          assertThat(ctx).hasNotFailed();
          ReceiptMaker receipts = ctx.getBean(ReceiptMaker.class);
          OrderMaker orders = ctx.getBean(OrderMaker.class);
          String id = "generic-" + UUID.randomUUID();
          Receipt first = receipts.make(id);
          Receipt again = receipts.make(id); // a LinkedHashMap here was a ClassCastException
          assertThat(again).isInstanceOf(Receipt.class).isEqualTo(first);

          // The same method on another subclass: its own type, and its own scope.
          List<Order> made = orders.make(id);
          List<Order> repeated = orders.make(id);
          assertThat(repeated).isEqualTo(made);
          assertThat(repeated.get(0)).isInstanceOf(Order.class);
          assertThat(charges(id)).isEqualTo(2);
          assertThat(keys(ReceiptMaker.class.getName() + ".make", id)).isEqualTo(1);
          assertThat(keys(OrderMaker.class.getName() + ".make", id)).isEqualTo(1);
        });
  }

  /** The application's ObjectMapper, with settings of its own. */
  @Configuration(proxyBeanMethods = false)
  static class SnakeCase {
    @Bean
    ObjectMapper objectMapper() {
      return JsonMapper.builder().propertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE).build();
    }
  }

  @Test
  void theFingerprintDoesNotDependOnTheApplicationsObjectMapper() {
    String id = "basket-" + UUID.randomUUID();
    runner().withUserConfiguration(SnakeCase.class).run(ctx -> {
      assertThat(ctx.getBean(ObjectMapper.class).getPropertyNamingStrategy()).isSameAs(PropertyNamingStrategies.SNAKE_CASE);
      assertThat(ctx.getBean(Payments.class).basket(id, new Basket("c-1", 3))).isEqualTo("basket " + id);
    });
    // After a deploy whose mapper is configured otherwise: the same call is a repeat, not another request.
    runner().run(ctx -> {
      Payments payments = ctx.getBean(Payments.class);
      assertThat(payments.basket(id, new Basket("c-1", 3))).isEqualTo("basket " + id);
      assertThat(ctx.getBean(Ledger.class).runs).hasValue(0);
      assertThatThrownBy(() -> payments.basket(id, new Basket("c-1", 4))).isInstanceOf(KeyReuseException.class);
    });
    assertThat(charges(id)).isEqualTo(1);
  }

  @Configuration(proxyBeanMethods = false)
  @EnableTransactionManagement(order = Ordered.HIGHEST_PRECEDENCE)
  static class TransactionsOutside {}

  /** Boot's own transaction management: its advisor ties with idem's (both lowest), registered after it. */
  @Configuration(proxyBeanMethods = false)
  static class BootsTransactions {}

  /** Whether Spring's transaction advice runs outside (before) idem's on {@code bean}. */
  static boolean transactionAdviceOutside(Object bean) {
    List<Class<?>> chain = Arrays.stream(((Advised) bean).getAdvisors()).map(Advisor::getClass).<Class<?>>map(c -> c).toList();
    assertThat(chain).contains(BeanFactoryTransactionAttributeSourceAdvisor.class, IdempotentMethods.class);
    return chain.indexOf(BeanFactoryTransactionAttributeSourceAdvisor.class) < chain.indexOf(IdempotentMethods.class);
  }

  @Test
  void transactionalAndIdempotentOnOneMethodMakeOneTransactionWithTheMethodsIsolationInEitherOrder() {
    List<Boolean> orders = new java.util.ArrayList<>();
    for (Class<?> config : List.of(TransactionsOutside.class, BootsTransactions.class)) {
      IdemAutoConfigurationTest.runner(db).withUserConfiguration(config)
          .withBean(Outside.class, () -> new Outside(db)).withBean(Isolated.class)
          .run(ctx -> {
            assertThat(ctx).hasNotFailed();
            Isolated isolated = ctx.getBean(Isolated.class);
            orders.add(transactionAdviceOutside(isolated));
            String id = "isolated-" + UUID.randomUUID();
            assertThat(isolated.pay(id)).isEqualTo("paid " + id);
            assertThat(isolated.pay(id)).isEqualTo("paid " + id);
            assertThat(db.count("SELECT count(*) FROM isolated WHERE id = ?", id)).isEqualTo(1);
            assertThat(db.count("SELECT count(*) FROM isolated WHERE id = ? AND isolation = 'serializable'", id))
                .as("the method's own isolation").isEqualTo(1);
            assertThat(db.count("SELECT count(*) FROM isolated WHERE id = ? AND key_seen_outside = 0", id))
                .as("the key uncommitted while the method ran").isEqualTo(1);
            assertThat(keys(Isolated.class.getName() + ".pay", id)).isEqualTo(1);
            if (!Vendors.mariadb(db)) {
              // PostgreSQL tells the transaction that wrote each row (MariaDB keeps no such trace).
              assertThat(db.count("SELECT count(*) FROM isolated i JOIN idem_keys k ON k.xmin = i.xmin"
                  + " WHERE i.id = ? AND k.scope = ? AND k.key = ?", id, Isolated.class.getName() + ".pay", id))
                  .as("the effect and the key in one transaction").isEqualTo(1);
            }
          });
    }
    assertThat(orders).as("both orders of the advisors were run").containsExactlyInAnyOrder(true, false);
  }
}
