package dev.idem.jdbc.internal.claim;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.internal.RecentKeys;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * A real executor's in-memory tables, found by walking what it reaches: none before its first
 * call, the smallest after a few new keys, on real PostgreSQL (the calls' rows read back).
 */
@IdemTest(poolSize = 2, sql = "CREATE TABLE effects (k text NOT NULL)")
class GuardMemoryTest {

  @Test
  void anExecutorAllocatesItsMemoriesAsItIsUsed(Idem idem, TestDatabase db) throws Exception {
    IdempotentExecutor executor = idem.executor().build();
    assertThat(slotsOf(executor, RecentKeys.class)).as("recent keys before any call").containsExactly(0);
    assertThat(slotsOf(executor, RecentAnswers.class)).as("kept rows before any call").containsExactly(0);

    for (int i = 0; i < 10; i++) {
      String k = "k" + i;
      executor.execute(IdempotencyKey.of("memory", k), Fingerprint.ofFields(Map.of("k", k)), Codec.utf8(), tx -> {
        tx.dsl().execute("INSERT INTO effects (k) VALUES (?)", k);
        return k;
      });
    }
    assertThat(db.count("SELECT count(*) FROM effects")).isEqualTo(10);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'memory'")).isEqualTo(10);
    assertThat(slotsOf(executor, RecentKeys.class)).as("10 keys: the first table, 4 KiB").containsExactly(512);
    assertThat(slotsOf(executor, RecentAnswers.class)).as("10 rows kept: the table, 32 KiB").containsExactly(RecentAnswers.SLOTS);
  }

  /** The {@code slots()} of every {@code type} the guard reaches through idem's own objects. */
  private static List<Integer> slotsOf(Object guard, Class<?> type) throws ReflectiveOperationException {
    List<Integer> found = new ArrayList<>();
    Set<Object> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    Deque<Object> todo = new ArrayDeque<>(List.of(guard));
    while (!todo.isEmpty()) {
      Object o = todo.pop();
      if (!seen.add(o)) {
        continue;
      }
      if (type.isInstance(o)) {
        Method slots = type.getDeclaredMethod("slots");
        slots.setAccessible(true);
        found.add((Integer) slots.invoke(o));
        continue;
      }
      if (o.getClass().isArray()) {
        for (int i = 0; !o.getClass().getComponentType().isPrimitive() && i < Array.getLength(o); i++) {
          Object e = Array.get(o, i);
          if (e != null && e.getClass().getName().startsWith("dev.idem.")) {
            todo.push(e);
          }
        }
        continue;
      }
      for (Class<?> c = o.getClass(); c != null && c.getName().startsWith("dev.idem."); c = c.getSuperclass()) {
        for (Field f : c.getDeclaredFields()) {
          if (Modifier.isStatic(f.getModifiers()) || f.getType().isPrimitive()) {
            continue;
          }
          f.setAccessible(true);
          Object v = f.get(o);
          if (v != null && (v.getClass().getName().startsWith("dev.idem.") || v.getClass().isArray())) {
            todo.push(v);
          }
        }
      }
    }
    return found;
  }
}
