package agent

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/internal/testing/servertest"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestRegisterStoresKeyAndAgentSigns: `dotlab agent register`'s Register
// keeps the private key 0600 in the config dir and registers its public
// half; an agent built from the stored key signs its run (and a run
// published with the refused, wrong key falls back to unsigned rather than
// being lost), against a real server on SQLite.
func TestRegisterStoresKeyAndAgentSigns(t *testing.T) {
	ctx := context.Background()
	t.Setenv("DOTLAB_CONFIG_DIR", t.TempDir())
	t.Setenv("DOTLAB_API_KEY", "")
	t.Setenv("DOTLAB_SIGNING_KEY", "")
	c := testServer(t)
	sub, _ := c.Register(ctx, dotlab.NewAgent{Name: "submitter", Operator: "test"})
	for i := range 2 {
		if _, err := c.WithKey(sub.APIKey).SubmitClaim(ctx, sqlstoretest.ManifestJSON("signed "+string(rune('a'+i))), "statistics"); err != nil {
			t.Fatal(err)
		}
	}
	reg, credPath, err := Register(ctx, c, dotlab.NewAgent{Name: "runner", Operator: "test"}, false)
	if err != nil {
		t.Fatal(err)
	}
	// Registering again keeps the stored agent unless told to replace it.
	if _, _, err := Register(ctx, c, dotlab.NewAgent{Name: "runner 2", Operator: "test"}, false); err == nil ||
		!strings.Contains(err.Error(), reg.ID) || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("second register: %v", err)
	}
	all, err := LoadCredentials(credPath)
	if err != nil {
		t.Fatal(err)
	}
	cr := all[c.Server()]
	if fi, err := os.Stat(cr.SigningKey); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key %s: %v %v", cr.SigningKey, fi, err)
	}
	k, ok, err := StoredKey(c.Server())
	if err != nil || !ok || k.Public().ID != reg.KeyID || reg.PublicKey != k.Public().Authorized {
		t.Fatalf("stored key %v %v; registered %q", ok, err, reg.KeyID)
	}
	authed, err := Connect(c.Server())
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{Client: authed, Engine: fakeEngine{}, WorkDir: t.TempDir(), Key: k}
	id, err := a.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cv, _ := c.Claim(ctx, id)
	r, err := c.Run(ctx, cv.RunID)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := attest.ParsePublicKey(reg.PublicKey)
	if r.SignedBy != reg.KeyID || attest.VerifyRun(ctx, pub, attest.Binding{}, &r.Body) != nil {
		t.Fatalf("run signed by %q, want %q", r.SignedBy, reg.KeyID)
	}
	// A key the server does not hold for this agent: published unsigned.
	wrong, _ := attest.GenerateKey()
	a.Key = wrong
	id2, err := a.RunOnce(ctx)
	if err != nil || id2 == "" || id2 == id {
		t.Fatalf("second job: %q %v", id2, err)
	}
	cv, _ = c.Claim(ctx, id2)
	if r, err := c.Run(ctx, cv.RunID); err != nil || r.SignedBy != "" || r.Body.Envelope != nil {
		t.Fatalf("run with a refused key: %+v %v", r, err)
	}
	// Another agent's API key in the environment: the stored key is not used.
	t.Setenv("DOTLAB_API_KEY", sub.APIKey)
	if _, ok, err := StoredKey(c.Server()); ok || err != nil {
		t.Fatalf("stored key used for another agent: %v %v", ok, err)
	}
}

// TestOpenRefusesAChangedKey: when the server shows another key for this
// agent than the one stored here (an operator swapped it), the agent
// commands refuse to work as that agent.
func TestOpenRefusesAChangedKey(t *testing.T) {
	ctx := context.Background()
	t.Setenv("DOTLAB_CONFIG_DIR", t.TempDir())
	t.Setenv("DOTLAB_API_KEY", "")
	t.Setenv("DOTLAB_SIGNING_KEY", "")
	c := testServer(t)
	if _, _, err := Register(ctx, c, dotlab.NewAgent{Name: "runner", Operator: "test"}, false); err != nil {
		t.Fatal(err)
	}
	cfg := Config{CacheDir: t.TempDir(), Runtime: "runc"}
	if _, _, err := Open(ctx, c.Server(), cfg, io.Discard); err != nil {
		t.Fatalf("open with the registered key: %v", err)
	}
	// Another key file where this agent's was: what the server shows no longer matches.
	other, _ := attest.GenerateKey()
	path := filepath.Join(t.TempDir(), "other.pem")
	if err := other.Save(path); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOTLAB_SIGNING_KEY", path)
	if _, _, err := Open(ctx, c.Server(), cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "refusing to work as this agent") {
		t.Fatalf("open with another key: %v", err)
	}
}

// TestAgentSignsBoundWhereTheServerTakesIt: against a server with a log
// (GET /status lists bound_signatures) the runner signs a v2 statement
// naming the server's log origin and its own agent id, which verifies
// bound there; against one without a log it signs v1, as before.
func TestAgentSignsBoundWhereTheServerTakesIt(t *testing.T) {
	ctx := context.Background()
	db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{})
	srv, _ := servertest.API(t, httpapi.Config{Store: db, AllowPrivateURLs: true, Log: db.Log()})
	logged, err := client.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Client{logged, testServer(t)} {
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sub, _ := c.Register(ctx, dotlab.NewAgent{Name: "submitter", Operator: "test"})
		if _, err := c.WithKey(sub.APIKey).SubmitClaim(ctx, sqlstoretest.ManifestJSON("bound"), "statistics"); err != nil {
			t.Fatal(err)
		}
		reg, k, err := RegisterSigned(ctx, c, dotlab.NewAgent{Name: "runner", Operator: "test"})
		if err != nil {
			t.Fatal(err)
		}
		a := &Agent{Client: c.WithKey(reg.APIKey), Engine: fakeEngine{}, WorkDir: t.TempDir(), Key: k}
		id, err := a.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cv, _ := c.Claim(ctx, id)
		r, err := c.Run(ctx, cv.RunID)
		if err != nil {
			t.Fatal(err)
		}
		p, err := attest.Peek(r.Body.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		want := attest.Binding{AgentID: reg.ID}
		if st.Log != nil {
			want.LogOrigin = st.Log.Origin
		}
		if bound := c == logged; bound != p.Bound() || (bound && *p.Binding != want) || bound != st.Features[FeatureBoundSignatures] {
			t.Fatalf("server with log %v: the run's statement %+v; want bound %v to %+v", st.Log != nil, p, bound, want)
		}
		if err := attest.VerifyRun(ctx, k.Public(), want, &r.Body); err != nil {
			t.Fatalf("the agent's run does not verify: %v", err)
		}
	}
}
