package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.lease.Leases;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.lang.reflect.Executable;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** Idem is the only way to build a tool: nothing a user can call takes idem's internal types. */
@IdemTest(poolSize = 4)
class ApiSurfaceTest {

  @Test
  void noPublicMethodOrConstructorOutsideInternalTakesAnInternalType() throws Exception {
    List<String> leaks = new ArrayList<>();
    for (Class<?> type : publicTypesOutsideInternal()) {
      List<Executable> callable = new ArrayList<>(List.of(type.getDeclaredMethods()));
      callable.addAll(List.of(type.getDeclaredConstructors()));
      for (Executable e : callable) {
        if (!Modifier.isPublic(e.getModifiers()) && !Modifier.isProtected(e.getModifiers())) {
          continue;
        }
        for (Class<?> p : e.getParameterTypes()) {
          if (p.getName().startsWith("dev.idem.jdbc.internal.")) {
            leaks.add(type.getName() + "." + e.getName() + " takes " + p.getName());
          }
        }
      }
    }
    assertThat(leaks).isEmpty();
  }

  /**
   * What users can call stays small: at most 321 public and protected methods and constructors in
   * the public types of the packages outside {@code internal} (issue 33: 250; issue 36: 71 more,
   * for the completer of unknown outcomes, the provider's side of reconciliation (its SPI and
   * findings are records, each with accessors, equals, hashCode and toString), lineage and the
   * dead letters' flags; as {@code javap -protected} counts them, bridges included).
   * Raising the bound is a deliberate change, seen in review.
   */
  @Test
  void theApiHasAtMost321MethodsAndConstructors() throws Exception {
    int count = 0;
    for (Class<?> type : publicTypesOutsideInternal()) {
      List<Executable> callable = new ArrayList<>(List.of(type.getDeclaredMethods()));
      callable.addAll(List.of(type.getDeclaredConstructors()));
      for (Executable e : callable) {
        if (Modifier.isPublic(e.getModifiers()) || Modifier.isProtected(e.getModifiers())) {
          count++;
        }
      }
    }
    assertThat(count).as("public and protected methods and constructors outside internal").isLessThanOrEqualTo(321);
  }

  private static List<Class<?>> publicTypesOutsideInternal() throws Exception {
    Path classes = Path.of(Idem.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    List<Class<?>> types = new ArrayList<>();
    try (Stream<Path> files = Files.walk(classes)) {
      for (Path file : (Iterable<Path>) files.filter(f -> f.toString().endsWith(".class"))::iterator) {
        String name = classes.relativize(file).toString().replace(file.getFileSystem().getSeparator(), ".");
        name = name.substring(0, name.length() - ".class".length());
        if (name.startsWith("dev.idem.jdbc.internal.") || name.endsWith("module-info") || name.endsWith("package-info")) {
          continue;
        }
        Class<?> type = Class.forName(name, false, Idem.class.getClassLoader());
        if (Modifier.isPublic(type.getModifiers())) {
          types.add(type);
        }
      }
    }
    return types;
  }

  @Test
  void aToolsFactoryCannotBeRegisteredTwice(Idem idem, TestDatabase db) {
    // Idem obtains the factory, which initializes Leases and registers it; a second registration is refused.
    Leases leases = idem.leases();
    assertThatThrownBy(() -> Factories.register(Leases.class, Void.class, Leases.class, (context, none) -> null))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("second registration is refused");
    // the registered factory still answers: the refused one never replaced it
    assertThat(idem.leases()).isNotNull().isNotSameAs(leases);
    assertThat(idem.leases().acquire("r", "h", java.time.Duration.ofSeconds(5))).isPresent();
    assertThat(db.count("SELECT count(*) FROM idem_leases WHERE resource = 'r' AND holder = 'h'")).isEqualTo(1);
  }
}
