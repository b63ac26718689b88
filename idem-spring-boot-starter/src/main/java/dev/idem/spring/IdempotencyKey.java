package dev.idem.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks the parameter of an {@link Idempotent} service method whose value is the key (its {@code
 * toString()}, which must be a valid key: non-empty, at most 255 visible ASCII characters). Its
 * class must be a {@code CharSequence}, number, {@code UUID}, enum, or declare its own {@code
 * toString()} (a record does): {@code Object}'s would make a new key every call. The other
 * arguments are the request's fingerprint.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.PARAMETER)
public @interface IdempotencyKey {}
