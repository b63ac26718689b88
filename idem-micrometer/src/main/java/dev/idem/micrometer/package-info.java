/**
 * Micrometer for idem: {@link dev.idem.micrometer.IdemMetrics} turns every {@link
 * dev.idem.event.IdemEvent} into low-cardinality meters (tagged by the event's {@code source} and
 * outcome, never by key or id), {@link dev.idem.micrometer.IdemGauges} exposes the outbox's
 * backlog and the unknown outcomes from values refreshed on a schedule (never a query per scrape), and
 * {@link dev.idem.micrometer.ObservedPublisher} puts each relay publish in an observation (a span
 * in traces). See docs/operations.md for the meters and what to alert on.
 */
package dev.idem.micrometer;
