-- A deterministic sqlite3 workload for tests/real: bulk inserts through
-- recursive CTEs, indexes, joins, aggregates, window functions, updates,
-- deletes, VACUUM. No randomness (random()/randomblob() are avoided).
PRAGMA journal_mode = WAL;
PRAGMA cache_size = -16000;
CREATE TABLE t(id INTEGER PRIMARY KEY, a INT, b TEXT, c REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 150000)
INSERT INTO t SELECT i, (i * 7919) % 1000,
  printf('name-%d-%s', i % 977, substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26)),
  (i % 1013) * 1.5 FROM n;
CREATE TABLE u(id INTEGER PRIMARY KEY, tid INT, v TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
INSERT INTO u SELECT i, (i * 31) % 150000 + 1,
  printf('%08x-%s', (i * 2654435761) % 4294967296, hex(i * i)) FROM n;
CREATE INDEX t_a ON t(a);
CREATE INDEX t_b ON t(b, c);
CREATE INDEX u_tid ON u(tid);
SELECT a, count(*), sum(c), min(b), max(b) FROM t GROUP BY a ORDER BY a LIMIT 15;
SELECT count(*), sum(t.c), max(u.v) FROM t JOIN u ON u.tid = t.id WHERE t.a < 500;
SELECT b, count(*) AS n FROM t GROUP BY b ORDER BY n DESC, b LIMIT 10;
SELECT id, a, sum(a) OVER (ORDER BY id ROWS BETWEEN 5 PRECEDING AND CURRENT ROW)
  FROM t WHERE id % 10000 = 0;
SELECT a % 10 AS k, group_concat(DISTINCT substr(b, -1)) FROM t
  WHERE id < 2000 GROUP BY k ORDER BY k;
BEGIN;
UPDATE t SET b = b || '-upd' WHERE a % 3 = 0;
DELETE FROM t WHERE a % 7 = 0;
INSERT INTO u SELECT id + 1000000, id, b FROM t WHERE a % 5 = 1;
COMMIT;
SELECT count(*), sum(length(b)) FROM t;
SELECT count(*) FROM u JOIN t ON t.id = u.tid;
SELECT group_concat(id, ',') FROM (SELECT id FROM t ORDER BY c DESC, id LIMIT 40);
CREATE TABLE agg AS SELECT a, count(*) AS n, avg(c) AS m FROM t GROUP BY a;
SELECT count(*), sum(n), round(sum(m), 3) FROM agg;
SELECT t.a, count(DISTINCT u.v) FROM t JOIN u ON u.tid = t.id
  GROUP BY t.a ORDER BY 2 DESC, 1 LIMIT 5;
VACUUM;
PRAGMA integrity_check;
SELECT count(*) FROM t WHERE b LIKE '%-upd';
