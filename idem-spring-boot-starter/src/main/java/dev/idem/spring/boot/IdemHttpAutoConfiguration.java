package dev.idem.spring.boot;

import dev.idem.event.IdemListener;
import dev.idem.http.IdempotencyKeyFilter;
import dev.idem.http.RequestFingerprint;
import dev.idem.http.RequestTransaction;
import dev.idem.http.ScopeResolver;
import dev.idem.http.StorePolicy;
import dev.idem.jdbc.Idem;
import dev.idem.spring.AfterCommitListener;
import dev.idem.spring.Idempotent;
import dev.idem.window.DedupeWindow;
import jakarta.servlet.DispatcherType;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.function.Consumer;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.core.Ordered;
import org.springframework.core.env.Environment;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerMapping;

/**
 * The {@code Idempotency-Key} guards of a servlet web application ({@code idem.http.*}). Nothing is
 * guarded until a Spring MVC handler method is annotated {@link Idempotent} or {@code
 * idem.http.url-patterns} is set; {@link IdemHttpGuards} sends each guarded request to an {@link
 * IdempotencyKeyFilter}, the engine of the hop, and everything else past it.
 *
 * <p>Each guarded request runs in a Spring transaction that idem's key joins, so the controller's
 * writes (through JdbcTemplate, jOOQ or JPA on the same DataSource) commit with the key and the
 * stored response, or none of them does. The guard is mapped after every other filter (Spring
 * Security's included), so the principal that scopes keys is known and no filter after it is
 * skipped when a run is repeated.
 *
 * <p>Whose key it is, one of: {@code idem.http.scope-header}; a {@link ScopeResolver} bean; the
 * authenticated principal (the default, refused at start-up without Spring Security, see {@link
 * IdemHttpGuards}); or, deliberately and dangerously, {@code idem.http.shared-scope=true}. Two of
 * them at once is refused at start-up.
 */
@AutoConfiguration(after = IdemAutoConfiguration.class)
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
@ConditionalOnClass({IdempotencyKeyFilter.class, FilterRegistrationBean.class, RequestMappingHandlerMapping.class})
@ConditionalOnBean({Idem.class, PlatformTransactionManager.class})
@ConditionalOnProperty(prefix = "idem.http", name = "enabled", matchIfMissing = true)
public class IdemHttpAutoConfiguration {

  /**
   * The filter of {@code idem.http.url-patterns}, built from {@code idem.http.*} and the
   * customizers (also the one whose {@code expire()} the expiry schedule runs). Reached only
   * through the guard, never mapped by itself.
   */
  @Bean
  @ConditionalOnMissingBean
  public IdempotencyKeyFilter idempotencyKeyFilter(Idem idem, IdemProperties properties, PlatformTransactionManager transactions,
      ObjectProvider<ScopeResolver> resolvers, ObjectProvider<IdemListener> listeners,
      ObjectProvider<IdempotencyKeyFilterCustomizer> customizers) {
    IdemProperties.Http p = properties.getHttp();
    IdempotencyKeyFilter.Builder b = builder(idem, p, transactions, resolvers, listeners).keyRequired(p.isKeyRequired());
    customizers.orderedStream().forEach(c -> c.customize(b));
    return b.build();
  }

  /** Keeps the servlet container from mapping the filter bean to every path: the guard decides. */
  @Bean
  @ConditionalOnMissingBean(name = "idempotencyKeyFilterRegistration")
  public FilterRegistrationBean<IdempotencyKeyFilter> idempotencyKeyFilterRegistration(IdempotencyKeyFilter filter) {
    FilterRegistrationBean<IdempotencyKeyFilter> registration = new FilterRegistrationBean<>(filter);
    registration.setEnabled(false);
    return registration;
  }

  /** Finds the {@link Idempotent} handlers and the url-pattern routes, and sends each to its filter. */
  @Bean
  IdemHttpGuards idemHttpGuards(IdempotencyKeyFilter urlFilter, Idem idem, IdemProperties properties,
      PlatformTransactionManager transactions, ObjectProvider<ScopeResolver> resolvers, ObjectProvider<IdemListener> listeners,
      ObjectProvider<IdempotencyKeyFilterCustomizer> customizers,
      @Qualifier("requestMappingHandlerMapping") ObjectProvider<RequestMappingHandlerMapping> mappings,
      Environment environment) {
    IdemProperties.Http p = properties.getHttp();
    boolean callerKnown = scope(p, resolvers) != null;
    return new IdemHttpGuards(route -> {
      IdempotencyKeyFilter.Builder b = builder(idem, p, transactions, resolvers, listeners);
      customizers.orderedStream().forEach(c -> c.customize(b));
      // The annotation is the route's own declaration: it wins over properties and customizers.
      b.guarded(request -> true).keyRequired(route.keyRequired())
          .storePolicy(StorePolicy.DEFAULT.alsoStoring(route.storedStatuses().stream().mapToInt(Integer::intValue).toArray()));
      if (route.window() != null) {
        b.window(DedupeWindow.of(route.window()));
      }
      return b.build();
    }, urlFilter, p, callerKnown, mappings, environment);
  }

  /** Maps the guard to every path, REQUEST dispatches only, after every other filter. */
  @Bean
  FilterRegistrationBean<IdemHttpGuards> idemHttpGuardsRegistration(IdemHttpGuards guards) {
    FilterRegistrationBean<IdemHttpGuards> registration = new FilterRegistrationBean<>(guards);
    registration.setName("idempotencyKeyFilter");
    registration.addUrlPatterns("/*");
    registration.setDispatcherTypes(DispatcherType.REQUEST);
    registration.setOrder(Ordered.LOWEST_PRECEDENCE - 10);
    return registration;
  }

  /** A builder with what every filter of the application shares: {@code idem.http.*}, scope, listener, transaction. */
  private static IdempotencyKeyFilter.Builder builder(Idem idem, IdemProperties.Http p, PlatformTransactionManager transactions,
      ObjectProvider<ScopeResolver> resolvers, ObjectProvider<IdemListener> listeners) {
    RequestFingerprint fingerprint = p.getFingerprintFields().isEmpty()
        ? (p.getFingerprint() == IdemProperties.Http.Fingerprint.RAW_BODY ? RequestFingerprint.rawBody() : RequestFingerprint.canonicalJson())
        : RequestFingerprint.jsonFields(p.getFingerprintFields().toArray(String[]::new));
    IdempotencyKeyFilter.Builder b = IdempotencyKeyFilter.builder(idem)
        .headerName(p.getHeaderName())
        .acceptBareKeys(p.isAcceptBareKeys())
        .fingerprint(fingerprint.withHeaders(p.getFingerprintHeaders().toArray(String[]::new)))
        .replayedHeaders(p.getReplayedHeaders().toArray(String[]::new))
        // The same listeners as the Idem bean's: the filter's own 422s and 409s count with the executor's.
        .listener(new AfterCommitListener(listeners.orderedStream().toList()))
        .transaction(new SpringRequestTransaction(new TransactionTemplate(transactions)));
    Consumer<IdempotencyKeyFilter.Builder> scope = scope(p, resolvers);
    if (scope != null) {
      scope.accept(b);
    }
    if (p.getProblemTypeBase() != null) {
      b.problemTypeBase(p.getProblemTypeBase());
    }
    if (p.getWindow() != null) {
      b.window(DedupeWindow.of(p.getWindow()));
    }
    if (p.getInFlightWait() != null) {
      b.inFlightWait(p.getInFlightWait());
    }
    if (p.getRetryAfter() != null) {
      b.retryAfter(p.getRetryAfter());
    }
    if (p.getMaxBodySize() != null) {
      b.maxBodySize(Math.toIntExact(p.getMaxBodySize().toBytes()));
    }
    return b;
  }

  /**
   * How keys are scoped, when configured: the scope header, a resolver bean, or the shared scope;
   * null for the filter's default, the principal. Two at once is refused.
   */
  private static Consumer<IdempotencyKeyFilter.Builder> scope(IdemProperties.Http p, ObjectProvider<ScopeResolver> resolvers) {
    List<String> set = new ArrayList<>();
    Consumer<IdempotencyKeyFilter.Builder> scope = null;
    if (p.getScopeHeader() != null && !p.getScopeHeader().isBlank()) {
      set.add("idem.http.scope-header=" + p.getScopeHeader());
      scope = b -> b.scopeHeader(p.getScopeHeader().trim());
    }
    List<ScopeResolver> beans = resolvers.orderedStream().toList();
    if (beans.size() > 1) {
      throw new IllegalStateException("idem.http: " + beans.size() + " ScopeResolver beans; keys are scoped in one way,"
          + " keep one");
    }
    ScopeResolver resolver = beans.isEmpty() ? null : beans.get(0);
    if (resolver != null) {
      set.add("a ScopeResolver bean");
      scope = b -> b.scope(resolver);
    }
    if (p.isSharedScope()) {
      set.add("idem.http.shared-scope=true");
      scope = IdempotencyKeyFilter.Builder::sharedScope;
    }
    if (set.size() > 1) {
      throw new IllegalStateException("idem.http: keys are scoped in one way, and " + String.join(", ", set)
          + " are all set; keep one");
    }
    return scope;
  }

  /**
   * Runs a guarded request in Spring's transaction: committed when the work returns, rolled back
   * when it throws anything, and what it threw rethrown unchanged (the filter's contract).
   */
  static final class SpringRequestTransaction implements RequestTransaction {
    private final TransactionTemplate template;

    SpringRequestTransaction(TransactionTemplate template) {
      this.template = template;
    }

    @Override
    public <T> T run(Callable<T> work) throws Exception {
      try {
        return template.execute(status -> {
          try {
            return work.call();
          } catch (RuntimeException | Error e) {
            throw e;
          } catch (Exception e) {
            throw new Checked(e); // TransactionTemplate rolls back on unchecked exceptions only
          }
        });
      } catch (Checked c) {
        throw c.checked;
      }
    }

    private static final class Checked extends RuntimeException {
      private static final long serialVersionUID = 1L;
      private final transient Exception checked;

      Checked(Exception checked) {
        super(checked.toString(), checked, false, false);
        this.checked = checked;
      }
    }
  }
}
