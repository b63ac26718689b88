-- A stand-in for idem-jdbc's partitioned layout (see ../migration/postgresql/V1__idem.sql for why):
-- the key table replaced by a partitioned one, which is what IdemFlyway reads the layout from.
DROP TABLE ${flyway:defaultSchema}.idem_keys;
CREATE TABLE ${flyway:defaultSchema}.idem_keys (scope text NOT NULL, key text NOT NULL, PRIMARY KEY (scope, key))
  PARTITION BY RANGE (key);
