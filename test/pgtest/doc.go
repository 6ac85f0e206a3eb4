// Package pgtest runs a throwaway PostgreSQL server for tests: Debian's PostgreSQL 15 in a temporary
// data directory, listening on 127.0.0.1 at a free port and on a Unix socket beside its data, with
// durability turned off for speed. It can be stopped and started again on the same port and data
// to play a database outage.
package pgtest
