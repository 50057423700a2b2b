-- bench/real/realprof.sql: sqlite3 in memory, 200k indexed rows, for
-- bench/realprof.sh (the profiler's cost on a real program).
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, note TEXT);
CREATE INDEX t_name ON t(name);
CREATE INDEX t_grp ON t(grp, id);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
  INSERT INTO t SELECT i, 'name-' || (i * 7919 % 200000), i % 1000, printf('%.*c', i % 200, 'x') FROM n;
SELECT grp, count(*), sum(length(note)) FROM t GROUP BY grp ORDER BY 3 DESC LIMIT 3;
SELECT count(*) FROM t a JOIN t b ON a.name = b.name WHERE a.grp < 100;
