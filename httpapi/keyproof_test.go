package httpapi_test

import (
	"testing"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/httpapi"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestBorrowedKeyRefused: an attacker copies an agent's public key (its
// profile shows it) and registers it on a server where it is not yet
// registered, to pass the agent's signed runs off there. Before, the
// registration needed no proof and was accepted; now it needs a proof
// signed by the key's private half over this server's log origin, the
// time, the name and the key: none, one signed by another key, the
// owner's proof for another server or for another name, and a stale one
// are each refused; the owner's own proof registers, and registering
// without a key still needs none.
func TestBorrowedKeyRefused(t *testing.T) {
	e := newEnvWith(t, sqlstore.SQLite, func(c *httpapi.Config) { c.Log = c.Store.(*sqlstore.DB).Log() })
	origin := e.db.Log().Origin()
	owner, _ := attest.GenerateKey()
	attacker, _ := attest.GenerateKey()
	now := e.clock.Now()
	reg := func(name, proof string) resp {
		return e.do("POST", "/api/v1/agents", "", dotlab.NewAgent{Name: name, Operator: "o", Capabilities: []string{}, PublicKey: owner.Public().Authorized, KeyProof: proof})
	}
	for what, proof := range map[string]string{
		"no proof":                "",
		"signed by another key":   attacker.KeyProof(origin, "thief", now),
		"made for another server": owner.KeyProof("dotlab.other.example/log", "thief", now),
		"made for another name":   owner.KeyProof(origin, "owner", now),
		"made an hour ago":        owner.KeyProof(origin, "thief", now.Add(-time.Hour)),
		"not a proof":             "12.abc",
	} {
		r := reg("thief", proof)
		expect(t, r, 422, "invalid")
		t.Logf("borrowed key, %s: %d %v", what, r.status, r.err().Detail)
	}
	expect(t, reg("owner", owner.KeyProof(origin, "owner", now)), 201, "")
	expect(t, e.do("POST", "/api/v1/agents", "", dotlab.NewAgent{Name: "keyless", Operator: "o", Capabilities: []string{}}), 201, "")
}
