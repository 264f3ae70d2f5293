-- city_transit: a city's public transport network (dev split). Made for pytest-agentgym; every value is invented.
CREATE TABLE lines (
    line_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    mode TEXT,
    opened_year INTEGER
);
CREATE TABLE stations (
    station_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    district TEXT,
    accessible INTEGER
);
CREATE TABLE stops (
    line_id INTEGER REFERENCES lines(line_id),
    station_id INTEGER REFERENCES stations(station_id),
    stop_order INTEGER,
    PRIMARY KEY (line_id, station_id)
);
CREATE TABLE ridership (
    station_id INTEGER REFERENCES stations(station_id),
    year INTEGER,
    riders INTEGER,
    PRIMARY KEY (station_id, year)
);
INSERT INTO lines VALUES
    (1, 'Red', 'metro', 1972),
    (2, 'Blue', 'metro', 1985),
    (3, 'Harbour', 'tram', 2003),
    (4, 'Airport', 'rail', 2012),
    (5, 'Hill', 'tram', 2019);
INSERT INTO stations VALUES
    (1, 'Central', 'Old Town', 1),
    (2, 'Market Square', 'Old Town', 0),
    (3, 'Riverside', 'Docks', 1),
    (4, 'University', 'North', 1),
    (5, 'Airport Terminal', 'East', 1),
    (6, 'Lighthouse', 'Docks', 0),
    (7, 'Museum', 'Old Town', 1),
    (8, 'Hilltop', 'North', 0),
    (9, 'Stadium', 'East', 1);
INSERT INTO stops VALUES
    (1, 1, 1), (1, 2, 2), (1, 4, 3), (1, 8, 4),
    (2, 7, 1), (2, 1, 2), (2, 3, 3), (2, 9, 4),
    (3, 3, 1), (3, 6, 2), (3, 2, 3),
    (4, 1, 1), (4, 9, 2), (4, 5, 3),
    (5, 4, 1), (5, 8, 2);
INSERT INTO ridership VALUES
    (1, 2022, 51000), (1, 2023, 56000),
    (2, 2022, 18000), (2, 2023, 17500),
    (3, 2022, 22000), (3, 2023, 25000),
    (4, 2022, 30500), (4, 2023, 31000),
    (5, 2022, 12000), (5, 2023, 19800),
    (6, 2022, 4000), (6, 2023, 4200),
    (7, 2022, 9000), (7, 2023, 11000),
    (8, 2022, 6500), (8, 2023, 6100),
    (9, 2022, 14000), (9, 2023, 16500);
