package sqlstore_test

import (
	"context"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
	"github.com/dotlab/dotlab/sqlstore"
)

// TestLookAlikeNames: a collaborator posing as the runner registers the
// runner's name again, in another case, with Greek and Cyrillic look-alike
// letters, or with zero-width and bidirectional characters. Without
// unique names every look-alike is accepted (the attack; invisible and
// bidirectional characters are refused either way); with them each is
// refused (409 duplicate naming the holder, or 422 invalid), while a name
// that merely shares letters passes.
func TestLookAlikeNames(t *testing.T) {
	lookAlikes := []string{"runner", "Runner", "RUNNER ", "r\u03c5nner", "runn\u0435r", "runner"}
	invisible := []string{"run\u200bner", "\u202erunner", "runner\u2066", "run\u00adner", "run\x1bner"}
	for _, unique := range []bool{false, true} {
		db := sqlstoretest.Open(t, sqlstore.SQLite, sqlstore.Options{Clock: sqlstoretest.NewClock(), UniqueNames: unique})
		ctx := context.Background()
		reg := func(name string) error {
			_, _, err := sqlstoretest.Protocol(db).CreateAgent(ctx, dotlab.NewAgent{Name: name, Operator: "test", Capabilities: []string{}})
			return err
		}
		if err := reg("runner"); err != nil {
			t.Fatal(err)
		}
		accepted := 0
		for _, n := range lookAlikes {
			err := reg(n)
			if err == nil {
				accepted++
			} else if unique && dotlab.ErrorCode(err) != dotlab.EDUPLICATE {
				t.Errorf("%q: %v, want duplicate", n, err)
			}
		}
		for _, n := range invisible {
			if err := reg(n); dotlab.ErrorCode(err) != dotlab.EINVALID {
				t.Errorf("%q: %v, want invalid", n, err)
			}
		}
		t.Logf("unique names %v: %d of %d look-alikes of \"runner\" accepted; %d names with invisible or bidirectional characters refused", unique, accepted, len(lookAlikes), len(invisible))
		switch {
		case !unique && accepted != len(lookAlikes):
			t.Errorf("attack not reproduced: %d accepted", accepted)
		case unique && accepted != 0:
			t.Errorf("%d look-alikes accepted", accepted)
		}
		if unique {
			for _, n := range []string{"runner two", "rummer", "Ada"} {
				if err := reg(n); err != nil {
					t.Errorf("%q: %v", n, err)
				}
			}
		}
	}
}
