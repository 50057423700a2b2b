#!/bin/bash
# A database under nalloc: the sqlite3 shell runs workload.sql on a file
# database (WAL), lookaside off so that small objects come from malloc;
# same output with and without nalloc.
. "$(dirname "$0")/common.sh" "$1"
need sqlite3
cd "$WORK"
run_plain sql sqlite3 -batch -bail -lookaside 0 0 plain.db ".read $HERE/workload.sql"
run_nalloc sql sqlite3 -batch -bail -lookaside 0 0 nalloc.db ".read $HERE/workload.sql"
same_output sql
grep -qx ok "$WORK/sql.nalloc.out" || fail "integrity_check did not say ok"
served sql 3000
echo "PASS $TEST"
