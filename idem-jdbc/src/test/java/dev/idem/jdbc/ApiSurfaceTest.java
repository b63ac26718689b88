package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.lease.Leases;
import java.lang.reflect.Executable;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** Idem is the only way to build a tool: nothing a user can call takes idem's internal types. */
class ApiSurfaceTest {

  @Test
  void noPublicMethodOrConstructorOutsideInternalTakesAnInternalType() throws Exception {
    Path classes = Path.of(Idem.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    List<String> leaks = new ArrayList<>();
    try (Stream<Path> files = Files.walk(classes)) {
      for (Path file : (Iterable<Path>) files.filter(f -> f.toString().endsWith(".class"))::iterator) {
        String name = classes.relativize(file).toString().replace(file.getFileSystem().getSeparator(), ".");
        name = name.substring(0, name.length() - ".class".length());
        if (name.startsWith("dev.idem.jdbc.internal.") || name.endsWith("module-info") || name.endsWith("package-info")) {
          continue;
        }
        Class<?> type = Class.forName(name, false, Idem.class.getClassLoader());
        if (!Modifier.isPublic(type.getModifiers())) {
          continue;
        }
        List<Executable> callable = new ArrayList<>(List.of(type.getDeclaredMethods()));
        callable.addAll(List.of(type.getDeclaredConstructors()));
        for (Executable e : callable) {
          if (!Modifier.isPublic(e.getModifiers()) && !Modifier.isProtected(e.getModifiers())) {
            continue;
          }
          for (Class<?> p : e.getParameterTypes()) {
            if (p.getName().startsWith("dev.idem.jdbc.internal.")) {
              leaks.add(name + "." + e.getName() + " takes " + p.getName());
            }
          }
        }
      }
    }
    assertThat(leaks).isEmpty();
  }

  @Test
  void aToolsFactoryCannotBeRegisteredTwice() {
    // Idem obtains the factory, which initializes Leases and registers it; a second registration is refused.
    try (TestIdem t = TestIdem.start("api_surface", 4, b -> b)) {
      Leases leases = t.idem().leases();
      assertThatThrownBy(() -> Factories.register(Leases.class, Void.class, Leases.class, (context, none) -> null))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("second registration is refused");
      // the registered factory still answers: the refused one never replaced it
      assertThat(t.idem().leases()).isNotNull().isNotSameAs(leases);
      assertThat(t.idem().leases().acquire("r", "h", java.time.Duration.ofSeconds(5))).isPresent();
      assertThat(t.db().count("SELECT count(*) FROM idem.idem_leases WHERE resource = 'r' AND holder = 'h'")).isEqualTo(1);
    }
  }
}
