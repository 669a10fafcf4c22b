package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sync"

	"github.com/pressly/goose/v3"
)

// schemaCheck is the goose provider SchemaVersion reads through: on the
// read pool, so that a readiness probe never waits for SQLite's single
// writer connection.
type schemaCheck struct {
	once sync.Once
	p    *goose.Provider
	err  error
}

// gooseProvider is a goose provider of the embedded migrations on pool.
func (db *DB) gooseProvider(pool *sql.DB, opts ...goose.ProviderOption) (*goose.Provider, error) {
	dialect := goose.DialectSQLite3
	if db.dialect == Postgres {
		dialect = goose.DialectPostgres
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(dialect, pool, sub, append(opts, goose.WithGoMigrations(outboxMigration(db.dialect)))...)
}

// SchemaVersion returns the migration version the database is at (the
// highest applied in goose's version table) and the latest migration this
// binary embeds; the two are equal once Open has migrated, and differ when
// another server process with other migrations shares the database. An
// error means the database could not be read (unreachable, or ctx ended):
// GET /readyz answers 503 for both (docs/deploy.md "Health and readiness").
func (db *DB) SchemaVersion(ctx context.Context) (applied, latest int64, err error) {
	db.schema.once.Do(func() { db.schema.p, db.schema.err = db.gooseProvider(db.r) })
	if db.schema.err != nil {
		return 0, 0, fmt.Errorf("migrations: %w", db.schema.err)
	}
	return db.schema.p.GetVersions(ctx)
}
