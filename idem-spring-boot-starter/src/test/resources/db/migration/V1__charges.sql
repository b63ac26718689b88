-- IdemOnMariaDbTest's application: its own migration, where Boot's Flyway looks by default
-- (the starter's other tests run without Boot's Flyway, or name their own locations).
CREATE TABLE charges (order_id VARCHAR(100) NOT NULL, amount INT NOT NULL);
