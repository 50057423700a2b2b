-- bench/real/footprint.sql: an in-memory sqlite3 workload for bench/footprint.sh
-- (sqlite3 with no file: the database lives in the heap). Rows of text and
-- blobs, two indexes, a join, deletes, updates that grow rows, a vacuum.
-- N rows: the shell replaces @N@.
PRAGMA cache_size = -2000000;
CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b INTEGER, c BLOB);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < @N@)
  INSERT INTO t SELECT i, hex(randomblob(16)), abs(random()) % 100000, randomblob(abs(random()) % 300) FROM n;
CREATE INDEX t_a ON t(a);
CREATE INDEX t_b ON t(b);
CREATE TABLE u AS SELECT b, count(*) AS k, sum(length(c)) AS s FROM t GROUP BY b;
SELECT count(*), sum(u.k) FROM t JOIN u USING (b) WHERE t.id % 7 = 0;
DELETE FROM t WHERE id % 3 = 0;
UPDATE t SET c = randomblob(400), a = a || a WHERE id % 5 = 0;
SELECT count(*), sum(length(c)), max(a) FROM t;
SELECT a FROM t ORDER BY c LIMIT 1 OFFSET 1000;
DROP INDEX t_a;
VACUUM;
SELECT count(*) FROM t;
