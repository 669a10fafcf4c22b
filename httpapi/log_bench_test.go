package httpapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/leakcheck"
	"github.com/dotlab/dotlab/sqlstore"
)

// BenchmarkWriteCycleLog is the API write cycle — GET /jobs/next, POST
// /jobs/{id}/accept, POST /runs — with the transparency log and, side by
// side in the same run, with logging switched off (sqlstore.Options.NoLog),
// on each engine. Goal: the cycle with the log at least 0.9x the cycle
// without (docs/verification.md "Performance"); the ratio is logged.
func BenchmarkWriteCycleLog(b *testing.B) {
	lk, err := leakcheck.New()
	if err != nil {
		b.Fatal(err)
	}
	for _, engine := range sqlstoretest.Engines {
		var nsOn, nsOff, nsSigned float64
		for _, v := range []struct {
			noLog, signed bool
			ns            *float64
		}{{false, false, &nsOn}, {true, false, &nsOff}, {false, true, &nsSigned}} {
			name := fmt.Sprintf("engine=%s/log=%v/signed=%v", engine, !v.noLog, v.signed)
			b.Run(name, func(b *testing.B) { *v.ns = writeCycles(b, lk, engine, v.noLog, v.signed) })
		}
		if nsOn > 0 && nsOff > 0 {
			b.Logf("%s: with the log %.0f cycles/s, without %.0f cycles/s: %.2fx", engine, 1e9/nsOn, 1e9/nsOff, nsOff/nsOn)
		}
		if nsOn > 0 && nsSigned > 0 {
			b.Logf("%s: signed runs (signed by the client, verified and logged by the server) %.0f cycles/s, unsigned %.0f cycles/s: %.2fx", engine, 1e9/nsSigned, 1e9/nsOn, nsOn/nsSigned)
		}
	}
}

// writeCycles runs b.N write cycles on a fresh server and returns ns per
// cycle; the claims are listed outside the timer.
func writeCycles(b *testing.B, lk *leakcheck.Checker, engine sqlstore.Dialect, noLog, signed bool) float64 {
	ctx := context.Background()
	clock := sqlstoretest.NewClock()
	db := sqlstoretest.Open(b, engine, sqlstore.Options{Clock: clock, NoLog: noLog})
	api, err := httpapi.New(httpapi.Config{Store: db, Clock: clock, Version: "bench", Leaks: lk, Log: db.Log()})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api)
	b.Cleanup(func() { api.Close(); srv.Close() })
	c, err := client.New(srv.URL, "")
	if err != nil {
		b.Fatal(err)
	}
	sub, _, err := sqlstoretest.Protocol(db).CreateAgent(ctx, dotlab.NewAgent{Name: "submitter", Operator: "bench", Capabilities: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	key, err := attest.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	reg := dotlab.NewAgent{Name: "runner", Operator: "bench", Capabilities: []string{}}
	if signed {
		reg.PublicKey = key.Public().Authorized
		reg.KeyProof = key.KeyProof(db.Log().Origin(), reg.Name, clock.Now())
	}
	created, err := c.Register(ctx, reg)
	if err != nil {
		b.Fatal(err)
	}
	runner := c.WithKey(created.APIKey)
	n := 0
	for b.Loop() {
		b.StopTimer()
		n++
		if _, err := sqlstoretest.Protocol(db).CreateClaim(ctx, sub.ID, sqlstoretest.NewClaim(b, fmt.Sprintf("cycle %d", n))); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		j, err := runner.NextJob(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := runner.Accept(ctx, j.ClaimID); err != nil {
			b.Fatal(err)
		}
		body := sqlstoretest.RunBody(j.ClaimID, "1.58", "1.17", dotlab.OutcomeReproduced)
		if signed {
			if body.Envelope, err = attest.SignRun(ctx, key, body); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := runner.PublishRun(ctx, body); err != nil {
			b.Fatal(err)
		}
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}
