package dev.idem.spring.boot;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.window.DedupeWindow;
import dev.idem.window.RepeatSource;
import java.time.Duration;
import java.util.Map;
import java.util.function.Function;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.support.AutowireCandidateQualifier;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.EnvironmentAware;
import org.springframework.context.annotation.ImportBeanDefinitionRegistrar;
import org.springframework.core.env.Environment;
import org.springframework.core.type.AnnotationMetadata;

/**
 * Registers one bean per {@code idem.executors.<name>} and {@code idem.inboxes.<name>}: bean name
 * {@code idem.executors.<name>} (or {@code idem.inboxes.<name>}), qualifier {@code <name>}.
 */
final class IdemToolsRegistrar implements ImportBeanDefinitionRegistrar, EnvironmentAware, BeanFactoryAware {
  private Environment environment;
  private BeanFactory beanFactory;

  @Override
  public void setEnvironment(Environment environment) {
    this.environment = environment;
  }

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    this.beanFactory = beanFactory;
  }

  @Override
  public void registerBeanDefinitions(AnnotationMetadata metadata, BeanDefinitionRegistry registry) {
    Binder binder = Binder.get(environment);
    Bindable<Map<String, IdemProperties.Guard>> guards = Bindable.mapOf(String.class, IdemProperties.Guard.class);
    binder.bind("idem.executors", guards).ifBound(map -> map.forEach((name, g) ->
        register(registry, "idem.executors." + name, name, IdempotentExecutor.class, () -> {
          IdempotentExecutor.Builder b = idem().executor().name("executor:" + name);
          apply(g, "idem.executors." + name, b::window, b::inFlightWait, b::retryAfter);
          if (g.getLease() != null) {
            b.lease(g.getLease());
          }
          return b.build();
        })));
    binder.bind("idem.inboxes", guards).ifBound(map -> map.forEach((name, g) ->
        register(registry, "idem.inboxes." + name, name, Inbox.class, () -> {
          Inbox.Builder b = idem().inbox(name);
          apply(g, "idem.inboxes." + name, b::window, b::inFlightWait, b::retryAfter);
          if (g.getLease() != null) {
            throw new IllegalArgumentException("idem.inboxes." + name + ".lease: an inbox has no lease (only an executor's external effects do)");
          }
          return b.build();
        })));
  }

  private Idem idem() {
    return beanFactory.getBean(Idem.class);
  }

  private static void apply(IdemProperties.Guard g, String prefix, Function<DedupeWindow, ?> window,
      Function<Duration, ?> inFlightWait, Function<Duration, ?> retryAfter) {
    try {
      if (g.getWindow() != null) {
        window.apply(DedupeWindow.of(g.getWindow(), g.getCovers().toArray(RepeatSource[]::new)));
      } else if (!g.getCovers().isEmpty()) {
        window.apply(DedupeWindow.covering(g.getCovers().get(0), g.getCovers().subList(1, g.getCovers().size()).toArray(RepeatSource[]::new)));
      }
      set(g.getInFlightWait(), inFlightWait);
      set(g.getRetryAfter(), retryAfter);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(prefix + ": " + e.getMessage(), e);
    }
  }

  private static void set(Duration d, Function<Duration, ?> setter) {
    if (d != null) {
      setter.apply(d);
    }
  }

  private static <T> void register(BeanDefinitionRegistry registry, String beanName, String qualifier, Class<T> type,
      java.util.function.Supplier<T> supplier) {
    RootBeanDefinition def = new RootBeanDefinition(type, supplier);
    def.addQualifier(new AutowireCandidateQualifier(Qualifier.class, qualifier));
    registry.registerBeanDefinition(beanName, def);
  }
}
