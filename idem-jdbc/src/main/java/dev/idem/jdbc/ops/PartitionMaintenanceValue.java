package dev.idem.jdbc.ops;



/** The one implementation of {@link PartitionMaintenance}: a value, built by idem only. */
record PartitionMaintenanceValue(int created, int dropped) implements PartitionMaintenance {}
