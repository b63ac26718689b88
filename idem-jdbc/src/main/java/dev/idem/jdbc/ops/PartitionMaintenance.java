package dev.idem.jdbc.ops;

/**
 * What one run of {@link Operations#maintainPartitions} did: daily partitions of the key table
 * and the inbox created ahead, and old ones dropped whole. Both are 0 in the default layout,
 * which has no partitions.
 */
public sealed interface PartitionMaintenance permits PartitionMaintenanceValue {
  int created();

  int dropped();
}
