-- school_library: a school's library (dev split). Made for pytest-agentgym; every value is invented.
CREATE TABLE authors (
    author_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    country TEXT,
    birth_year INTEGER
);
CREATE TABLE books (
    book_id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    author_id INTEGER REFERENCES authors(author_id),
    genre TEXT,
    published_year INTEGER,
    pages INTEGER
);
CREATE TABLE members (
    member_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    grade INTEGER,
    joined_year INTEGER
);
CREATE TABLE loans (
    loan_id INTEGER PRIMARY KEY,
    book_id INTEGER REFERENCES books(book_id),
    member_id INTEGER REFERENCES members(member_id),
    loan_date TEXT,
    return_date TEXT
);
INSERT INTO authors VALUES
    (1, 'Ada Brook', 'Ireland', 1950),
    (2, 'Tomas Lind', 'Sweden', 1962),
    (3, 'Mei Sato', 'Japan', 1975),
    (4, 'Rafael Ortiz', 'Spain', 1981),
    (5, 'Grace Okafor', 'Nigeria', 1968),
    (6, 'Lena Vogel', 'Germany', 1990);
INSERT INTO books VALUES
    (1, 'River of Glass', 1, 'Fiction', 1988, 320),
    (2, 'The Quiet Orbit', 2, 'Science', 1995, 210),
    (3, 'Paper Lanterns', 3, 'Fiction', 2004, 185),
    (4, 'Counting Stars', 2, 'Science', 2001, 260),
    (5, 'Salt and Stone', 4, 'History', 2010, 402),
    (6, 'The Last Harbour', 1, 'Fiction', 1999, 288),
    (7, 'Green Machines', 5, 'Science', 2015, 176),
    (8, 'Kingdoms of Clay', 4, 'History', 2018, 350),
    (9, 'Night Garden', 6, 'Poetry', 2020, 96),
    (10, 'Winter Letters', 3, 'Poetry', 2012, 120),
    (11, 'Bridges', 5, 'Fiction', 2021, 240),
    (12, 'Maps of the Mind', 2, 'Fiction', 2019, 300);
INSERT INTO members VALUES
    (1, 'Noah Park', 9, 2021),
    (2, 'Ivy Chen', 10, 2020),
    (3, 'Omar Haddad', 11, 2019),
    (4, 'Zoe Martin', 9, 2022),
    (5, 'Liam Novak', 12, 2018),
    (6, 'Aria Singh', 10, 2021),
    (7, 'Ben Carter', 11, 2022),
    (8, 'Maya Rossi', 12, 2019);
INSERT INTO loans VALUES
    (1, 1, 2, '2023-01-09', '2023-01-20'),
    (2, 3, 2, '2023-01-21', '2023-02-02'),
    (3, 2, 3, '2023-02-01', '2023-02-15'),
    (4, 5, 5, '2023-02-03', NULL),
    (5, 1, 1, '2023-02-10', '2023-02-24'),
    (6, 7, 4, '2023-03-01', '2023-03-08'),
    (7, 9, 6, '2023-03-02', '2023-03-05'),
    (8, 4, 3, '2023-03-15', '2023-03-30'),
    (9, 1, 6, '2023-04-01', '2023-04-12'),
    (10, 12, 8, '2023-04-04', NULL),
    (11, 8, 5, '2023-04-10', '2023-04-28'),
    (12, 3, 7, '2023-05-02', '2023-05-09'),
    (13, 6, 2, '2023-05-05', '2023-05-19'),
    (14, 11, 1, '2023-05-20', NULL),
    (15, 1, 8, '2023-06-01', '2023-06-10');
