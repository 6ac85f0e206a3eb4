package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/pgtest"
)

// TestStartStopRestart: the server accepts connections, refuses them while stopped, and comes
// back on the same port with the data written before the outage.
func TestStartStopRestart(t *testing.T) {
	g := NewWithT(t)
	start := time.Now()
	dsn := pgtest.Start(t)
	t.Logf("PostgreSQL up with a database in %s", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()

	conn, err := pgx.Connect(ctx, dsn)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conn.Close(ctx)).To(Succeed())

	pgtest.Stop(t, dsn)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = pgx.Connect(short, dsn)
	g.Expect(err).To(HaveOccurred(), "a stopped server refuses connections")

	start = time.Now()
	pgtest.Restart(t, dsn)
	t.Logf("PostgreSQL restarted in %s", time.Since(start).Round(time.Millisecond))
	conn, err = pgx.Connect(ctx, dsn)
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close(ctx)
	var v int
	g.Expect(conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v)).To(Succeed())
	g.Expect(v).To(Equal(42))
}

// TestDatabasesAreSeparate: each CreateDatabase is empty, so tests sharing a server do not see
// each other's tables.
func TestDatabasesAreSeparate(t *testing.T) {
	g := NewWithT(t)
	s := pgtest.NewServer(t)
	ctx := context.Background()
	a, err := pgx.Connect(ctx, s.CreateDatabase(t))
	g.Expect(err).NotTo(HaveOccurred())
	defer a.Close(ctx)
	_, err = a.Exec(ctx, "CREATE TABLE only_in_a (v int)")
	g.Expect(err).NotTo(HaveOccurred())
	b, err := pgx.Connect(ctx, s.CreateDatabase(t))
	g.Expect(err).NotTo(HaveOccurred())
	defer b.Close(ctx)
	_, err = b.Exec(ctx, "SELECT * FROM only_in_a")
	g.Expect(err).To(MatchError(ContainSubstring("does not exist")))
}

// TestForMain: a TestMain gets a server and a database without a testing.TB, can stop and start it
// from its tests like any other, and stop removes it.
func TestForMain(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: the test needs a PostgreSQL server")
	}
	g := NewWithT(t)
	s, dsn, stop, err := pgtest.ForMain()
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conn.Close(ctx)).To(Succeed())
	s.Restart(t)
	conn, err = pgx.Connect(ctx, dsn)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conn.Close(ctx)).To(Succeed())
	stop()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = pgx.Connect(short, dsn)
	g.Expect(err).To(HaveOccurred(), "stop stops the server")
}
