package sqlstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestPoolSize: pool_max_conns in a PostgreSQL URL sets the store's pool
// and is not passed on to the server (which refuses unknown settings); a
// bad value is refused with the fix.
func TestPoolSize(t *testing.T) {
	for _, c := range []struct {
		in, out string
		n       int
		err     string
	}{
		{"postgres://u@h/db?sslmode=disable", "postgres://u@h/db?sslmode=disable", 32, ""},
		{"postgres://u@h/db?pool_max_conns=8&sslmode=disable", "postgres://u@h/db?sslmode=disable", 8, ""},
		{"postgres://u@h/db?pool_max_conns=0", "", 0, "from 1 to 1000"},
		{"postgres://u@h/db?pool_max_conns=many", "", 0, "from 1 to 1000"},
	} {
		out, n, err := sqlstore.PoolSize(c.in)
		if out != c.out || n != c.n || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("PoolSize(%q) = %q %d %v, want %q %d %q", c.in, out, n, err, c.out, c.n, c.err)
		}
	}
	u := sqlstoretest.URL(t, sqlstore.Postgres)
	db, err := sqlstore.Open(context.Background(), u+"&pool_max_conns=2", sqlstore.Options{})
	if err != nil {
		t.Fatalf("open with pool_max_conns: %v", err)
	}
	defer db.Close()
	if err := db.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlstore.Open(context.Background(), u+"&pool_max_conns=-1", sqlstore.Options{}); err == nil || !strings.Contains(err.Error(), "pool_max_conns") {
		t.Fatalf("pool_max_conns=-1: %v", err)
	}
}
