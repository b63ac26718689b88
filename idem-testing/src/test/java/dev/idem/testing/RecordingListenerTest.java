package dev.idem.testing;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.key.IdempotencyKey;
import java.lang.reflect.Method;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class RecordingListenerTest {

  @Test
  void everyListenerMethodIsOverriddenSoNoEventIsMissed() {
    for (Method m : IdemListener.class.getDeclaredMethods()) {
      if (m.isDefault()) {
        assertThat(Arrays.stream(RecordingListener.class.getDeclaredMethods())
            .anyMatch(r -> r.getName().equals(m.getName()) && Arrays.equals(r.getParameterTypes(), m.getParameterTypes())))
            .as("RecordingListener overrides " + m.getName()).isTrue();
      }
    }
  }

  @Test
  void eventsAreKeptInOrderAndFoundByTypeAndKey() {
    RecordingListener recorder = new RecordingListener();
    IdempotencyKey a = IdempotencyKey.of("s", "a");
    IdempotencyKey b = IdempotencyKey.of("s", "b");
    recorder.onApplied(new IdemEvent.Applied("executor", a));
    recorder.onExpired(new IdemEvent.Expired("executor", 3));
    recorder.onApplied(new IdemEvent.Applied("executor", b));

    assertThat(recorder.all()).hasSize(3);
    assertThat(recorder.of(IdemEvent.Applied.class)).extracting(IdemEvent.Applied::key).containsExactly(a, b);
    assertThat(recorder.of(IdemEvent.Applied.class, b)).hasSize(1);
    assertThat(recorder.of(IdemEvent.Expired.class, a)).isEmpty();
    recorder.clear();
    assertThat(recorder.all()).isEmpty();
  }
}
