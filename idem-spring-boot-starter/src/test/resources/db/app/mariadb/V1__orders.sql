-- The application's own table on MariaDB: a TEXT column cannot be a key there without a length.
CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY);
