package dev.idem.spring.boot;

import dev.idem.http.IdempotencyKeyFilter;
import dev.idem.http.LongOperations;
import dev.idem.http.RequestFingerprint;
import dev.idem.http.RequestTransaction;
import dev.idem.http.ScopeResolver;
import dev.idem.http.StorePolicy;
import dev.idem.jdbc.Idem;
import dev.idem.spring.Idempotent;
import dev.idem.window.DedupeWindow;
import jakarta.servlet.DispatcherType;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.function.Consumer;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Qualifier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.env.Environment;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.stereotype.Controller;
import org.springframework.transaction.support.TransactionTemplate;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.context.WebApplicationContext;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerMapping;

/**
 * The {@code Idempotency-Key} guards of a servlet web application ({@code idem.http.*}). Nothing is
 * guarded until a Spring MVC handler method is annotated {@link Idempotent} or {@code
 * idem.http.url-patterns} is set; {@link IdemHttpGuards} sends each guarded request to an {@link
 * IdempotencyKeyFilter}, the engine of the hop, and everything else past it.
 *
 * <p>Each guarded request runs in a Spring transaction that idem's key joins, so the controller's
 * writes (through JdbcTemplate, jOOQ or JPA on the same DataSource) commit with the key and the
 * stored response, or none of them does. The guard is one servlet filter at {@code
 * idem.http.filter-order}, by default {@code Ordered.LOWEST_PRECEDENCE - 10}: after Spring
 * Security's filter chain (order -100) and every filter ordered below it, so the principal that
 * scopes keys is known. A filter with no order of its own ({@code LOWEST_PRECEDENCE}) runs after
 * the guard: if it authenticates the caller (sets what a {@link ScopeResolver} reads), give it a
 * lower order, or raise {@code idem.http.filter-order}. Filters after the guard are not run again
 * when a run is repeated.
 *
 * <p>Whose key it is, one of: {@code idem.http.scope-header}; a {@link ScopeResolver} bean; the
 * authenticated principal (the default, refused at start-up without Spring Security, see {@link
 * IdemHttpGuards}); or, deliberately and dangerously, {@code idem.http.shared-scope=true}. Two of
 * them at once is refused at start-up.
 *
 * <p>{@link Idempotent} handlers and {@code idem.http.url-patterns} that would not be guarded are
 * never silent: with {@code idem.http.enabled=false} start-up logs a WARN naming them; in a WebFlux application, or a servlet
 * one without an {@code Idem} or a {@code PlatformTransactionManager} bean, start-up fails naming
 * them (set {@code idem.http.enabled=false} to run them unguarded on purpose).
 */
@AutoConfiguration(after = IdemAutoConfiguration.class)
@ConditionalOnClass(name = "org.springframework.web.bind.annotation.RequestMapping")
public class IdemHttpAutoConfiguration {
  /**
   * The name of the {@code IdempotencyKeyFilter} bean's disabled registration, as Boot's INFO line
   * shows it: "Filter NAME was not registered (disabled)".
   */
  static final String URL_FILTER_NAME = "IdempotencyKeyFilter of idem.http.url-patterns (run inside idem's guard,"
      + " the filter idempotencyKeyFilter, so never mapped on its own)";

  /** Tells of {@link Idempotent} handlers that no guard covers (see the class comment). */
  @Bean
  static UnguardedHandlers idemHttpUnguardedHandlers(ApplicationContext context) {
    return new UnguardedHandlers(context);
  }

  /** The guards, in a servlet application with idem and Spring's transactions. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
  @ConditionalOnClass({IdempotencyKeyFilter.class, FilterRegistrationBean.class, RequestMappingHandlerMapping.class})
  @ConditionalOnBean({Idem.class, PlatformTransactionManager.class})
  @ConditionalOnProperty(prefix = "idem.http", name = "enabled", matchIfMissing = true)
  public static class Guards {


    /**
     * The filter of {@code idem.http.url-patterns}, built from {@code idem.http.*} and the
     * customizers (also the one whose {@code expire()} the expiry schedule runs). Reached only
     * through the guard, never mapped by itself.
     */
    @Bean
    @ConditionalOnMissingBean
    public IdempotencyKeyFilter idempotencyKeyFilter(Idem idem, IdemProperties properties, PlatformTransactionManager transactions,
        ObjectProvider<ScopeResolver> resolvers,
        ObjectProvider<IdempotencyKeyFilterCustomizer> customizers, ObjectProvider<LongOperations> operations) {
      IdemProperties.Http p = properties.getHttp();
      return builder(idem, p, transactions, scope(p, resolvers), customizers, operations.getIfAvailable()).build();
    }

    /**
     * The long operations of {@code idem.http.long-operations.*}, made when its {@code status-path}
     * is set: every guard's filter answers their status resources, handlers accept with it and
     * workers complete with it.
     */
    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnProperty(prefix = "idem.http.long-operations", name = "status-path")
    public LongOperations idemLongOperations(Idem idem, IdemProperties properties) {
      IdemProperties.Http p = properties.getHttp();
      IdemProperties.Http.LongOperations o = p.getLongOperations();
      Duration window = o.getWindow() != null ? o.getWindow() : p.getWindow();
      try {
        LongOperations.Builder b = LongOperations.builder(idem, o.getStatusPath().trim()).maxWait(o.getMaxWait());
        if (window != null) {
          b.window(DedupeWindow.of(window));
        }
        return b.build();
      } catch (IllegalArgumentException e) {
        throw new IdemSetupException("idem.http.long-operations: " + e.getMessage(), "Fix that property.", e);
      }
    }

    /**
     * Keeps the servlet container from mapping the filter bean to every path: the guard decides.
     * Boot logs a disabled registration at INFO as "Filter NAME was not registered (disabled)";
     * the name says that only this bean is, and why, so the line does not read as "idem is off".
     */
    @Bean
    @ConditionalOnMissingBean(name = "idempotencyKeyFilterRegistration")
    public FilterRegistrationBean<IdempotencyKeyFilter> idempotencyKeyFilterRegistration(IdempotencyKeyFilter filter) {
      FilterRegistrationBean<IdempotencyKeyFilter> registration = new FilterRegistrationBean<>(filter);
      registration.setName(URL_FILTER_NAME);
      registration.setEnabled(false);
      return registration;
    }

    /** Finds the {@link Idempotent} handlers and the url-pattern routes, and sends each to its filter. */
    @Bean
    IdemHttpGuards idemHttpGuards(IdempotencyKeyFilter urlFilter, Idem idem, IdemProperties properties,
        PlatformTransactionManager transactions, ObjectProvider<ScopeResolver> resolvers,
        ObjectProvider<IdempotencyKeyFilterCustomizer> customizers,
        @Qualifier("requestMappingHandlerMapping") ObjectProvider<RequestMappingHandlerMapping> mappings,
        Environment environment, ObjectProvider<LongOperations> longOperations) {
      IdemProperties.Http p = properties.getHttp();
      LongOperations operations = longOperations.getIfAvailable();
      // Once: the resolver beans are streamed and two scopes refused here, not once per route.
      Consumer<IdempotencyKeyFilter.Builder> scope = scope(p, resolvers);
      boolean callerKnown = scope != null;
      return new IdemHttpGuards(route -> {
        IdempotencyKeyFilter.Builder b = builder(idem, p, transactions, scope, customizers, operations);
        // The annotation is the route's own declaration: what it says wins over properties and
        // customizers; what it leaves out (no storedStatuses) stays theirs.
        b.guarded(request -> true).keyRequired(route.keyRequired());
        if (!route.storedStatuses().isEmpty()) {
          b.storePolicy(StorePolicy.DEFAULT.alsoStoring(route.storedStatuses().stream().mapToInt(Integer::intValue).toArray()));
        }
        if (route.window() != null) {
          b.window(DedupeWindow.of(route.window()));
        }
        return b.build();
      }, urlFilter, p, callerKnown, mappings, environment, operations == null ? null : operations.statusPath());
    }

    /** Maps the guard to every path, REQUEST dispatches only, at {@code idem.http.filter-order}. */
    @Bean
    FilterRegistrationBean<IdemHttpGuards> idemHttpGuardsRegistration(IdemHttpGuards guards, IdemProperties properties) {
      FilterRegistrationBean<IdemHttpGuards> registration = new FilterRegistrationBean<>(guards);
      registration.setName("idempotencyKeyFilter");
      registration.addUrlPatterns("/*");
      registration.setDispatcherTypes(DispatcherType.REQUEST);
      registration.setOrder(properties.getHttp().getFilterOrder());
      return registration;
    }

    /**
     * A builder with what every filter of the application shares: {@code idem.http.*}, scope
     * ({@link #scope}, null for the principal), transaction; then the customizers, whose settings win.
     */
    private static IdempotencyKeyFilter.Builder builder(Idem idem, IdemProperties.Http p, PlatformTransactionManager transactions,
        Consumer<IdempotencyKeyFilter.Builder> scope, ObjectProvider<IdempotencyKeyFilterCustomizer> customizers,
        LongOperations operations) {
      RequestFingerprint fingerprint = p.getFingerprintFields().isEmpty()
          ? (p.getFingerprint() == IdemProperties.Http.Fingerprint.RAW_BODY ? RequestFingerprint.rawBody() : RequestFingerprint.canonicalJson())
          : RequestFingerprint.jsonFields(p.getFingerprintFields().toArray(String[]::new));
      IdempotencyKeyFilter.Builder b = IdempotencyKeyFilter.builder(idem)
          .headerName(p.getHeaderName())
          .acceptBareKeys(p.isAcceptBareKeys())
          .keyRequired(p.isKeyRequired())
          .fingerprint(fingerprint.withHeaders(p.getFingerprintHeaders().toArray(String[]::new)))
          .replayedHeaders(p.getReplayedHeaders().toArray(String[]::new))
          .transaction(new SpringRequestTransaction(new TransactionTemplate(transactions)));
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
      if (operations != null) {
        b.longOperations(operations);
      }
      customizers.orderedStream().forEach(c -> c.customize(b));
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
        throw new IdemSetupException("idem.http: there are " + beans.size() + " ScopeResolver beans, and keys are scoped"
            + " in one way", "Keep one ScopeResolver bean.");
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
        String listed = set.size() == 2 ? set.get(0) + " and " + set.get(1) + " are both set"
            : String.join(", ", set.subList(0, set.size() - 1)) + " and " + set.get(set.size() - 1) + " are all set";
        throw new IdemSetupException("idem.http: keys are scoped in one way, and " + listed, "Keep one of them.");
      }
      return scope;
    }
  }

  /**
   * At start-up, finds {@link Idempotent} handler methods (of {@code @Controller} beans, mapped by
   * {@code @RequestMapping}) and {@code idem.http.url-patterns} when no guard was configured for
   * them: a WARN when HTTP guards are off on purpose ({@code idem.http.enabled=false}), else a
   * failed start-up naming them and why.
   * Knows the guards only by bean name, so it loads no servlet class in a WebFlux application.
   */
  static final class UnguardedHandlers implements SmartInitializingSingleton {
    private static final Logger LOG = LoggerFactory.getLogger(IdemHttpAutoConfiguration.class);
    private final ApplicationContext context;

    UnguardedHandlers(ApplicationContext context) {
      this.context = context;
    }

    @Override
    public void afterSingletonsInstantiated() {
      if (context.containsBean("idemHttpGuards")) {
        return;
      }
      boolean servlet = context instanceof WebApplicationContext;
      boolean reactive = !servlet && context.containsBean("webHandler");
      if (!servlet && !reactive) {
        return; // no web server: no handler is reached
      }
      List<String> unguarded = handlers();
      List<String> urlPatterns = Binder.get(context.getEnvironment())
          .bind("idem.http.url-patterns", Bindable.listOf(String.class)).orElse(List.of());
      if (!urlPatterns.isEmpty()) {
        unguarded.add("idem.http.url-patterns=" + urlPatterns);
      }
      if (unguarded.isEmpty()) {
        return;
      }
      String which = String.join(", ", unguarded);
      if (!context.getEnvironment().getProperty("idem.http.enabled", Boolean.class, true)) {
        LOG.warn("idem.http.enabled=false: these @Idempotent handlers and url patterns are NOT guarded, every request"
            + " is run as sent, repeats included: {}", which);
        return;
      }
      String why = reactive ? "this is a WebFlux application, and @Idempotent guards Spring MVC handlers only"
          : context.getBeanNamesForType(Idem.class).length == 0 ? "there is no Idem bean (idem needs one DataSource)"
          : context.getBeanNamesForType(PlatformTransactionManager.class).length == 0
              ? "there is no PlatformTransactionManager bean (each guarded request runs in Spring's transaction)"
          : "the starter's HTTP guard is not configured (a class it needs is missing from the class path)";
      String what = urlPatterns.isEmpty() ? "@Idempotent handlers" : unguarded.size() == 1 ? "idem.http.url-patterns"
          : "@Idempotent handlers and idem.http.url-patterns";
      throw new IdemSetupException(what + " would run unguarded, because " + why + ": " + which,
          "Fix that, or set idem.http.enabled=false to run them unguarded on purpose.");
    }

    private List<String> handlers() {
      List<String> found = new ArrayList<>();
      for (String name : context.getBeanNamesForAnnotation(Controller.class)) {
        Class<?> type = context.getType(name);
        if (type == null) {
          continue;
        }
        Class<?> user = ClassUtils.getUserClass(type);
        MethodIntrospector.selectMethods(user, (ReflectionUtils.MethodFilter) m ->
                AnnotatedElementUtils.hasAnnotation(m, Idempotent.class) && AnnotatedElementUtils.hasAnnotation(m, RequestMapping.class))
            .forEach(m -> found.add(user.getSimpleName() + "." + m.getName()));
      }
      found.sort(null);
      return found;
    }
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
