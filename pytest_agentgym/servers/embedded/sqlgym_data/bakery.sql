-- bakery: a small bakery's products and orders (train split). Made for pytest-agentgym; every value is invented.
CREATE TABLE products (
    product_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT,
    price REAL
);
CREATE TABLE orders (
    order_id INTEGER PRIMARY KEY,
    product_id INTEGER REFERENCES products(product_id),
    customer TEXT,
    quantity INTEGER,
    order_date TEXT
);
INSERT INTO products VALUES
    (1, 'Sourdough Loaf', 'bread', 5.5),
    (2, 'Rye Loaf', 'bread', 4.75),
    (3, 'Croissant', 'pastry', 2.25),
    (4, 'Cinnamon Roll', 'pastry', 3.0),
    (5, 'Lemon Tart', 'cake', 4.5),
    (6, 'Carrot Cake', 'cake', 18.0),
    (7, 'Baguette', 'bread', 3.25);
INSERT INTO orders VALUES
    (1, 1, 'Hana', 2, '2024-03-01'),
    (2, 3, 'Hana', 6, '2024-03-01'),
    (3, 6, 'Paulo', 1, '2024-03-02'),
    (4, 7, 'Greta', 3, '2024-03-02'),
    (5, 4, 'Paulo', 4, '2024-03-03'),
    (6, 2, 'Sven', 1, '2024-03-04'),
    (7, 5, 'Greta', 2, '2024-03-05'),
    (8, 3, 'Sven', 12, '2024-03-05'),
    (9, 1, 'Greta', 1, '2024-03-06'),
    (10, 7, 'Hana', 2, '2024-03-07');
