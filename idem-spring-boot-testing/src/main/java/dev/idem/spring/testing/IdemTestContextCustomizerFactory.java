package dev.idem.spring.testing;

import java.util.List;
import org.springframework.test.context.ContextConfigurationAttributes;
import org.springframework.test.context.ContextCustomizer;
import org.springframework.test.context.ContextCustomizerFactory;
import org.springframework.test.context.TestContextAnnotationUtils;

/**
 * Registered in {@code META-INF/spring.factories}: gives every test class annotated {@link
 * AutoConfigureIdemTest} (or nested in one) an {@link IdemTestContextCustomizer}, and nothing to
 * the others.
 */
final class IdemTestContextCustomizerFactory implements ContextCustomizerFactory {
  @Override
  public ContextCustomizer createContextCustomizer(Class<?> testClass, List<ContextConfigurationAttributes> configAttributes) {
    return TestContextAnnotationUtils.hasAnnotation(testClass, AutoConfigureIdemTest.class)
        ? new IdemTestContextCustomizer()
        : null;
  }
}
