CREATE TABLE orders (order_id text NOT NULL, amount int NOT NULL);
