package web_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/testing/sqlstoretest"
)

// TestPagesShowHugeNumbersShort: a run whose rerun value is at the top of
// the accepted range has a 312-digit exact difference; the claim and run
// pages show it (and the challenge's delta) in scientific notation with at
// most 17 significant digits, marked "≈", while the API record keeps it
// exact.
func TestPagesShowHugeNumbersShort(t *testing.T) {
	s := newSite(t)
	ctx := context.Background()
	// Only this agent has "tpu", so only it can draw the claim.
	runner, key, err := sqlstoretest.Protocol(s.db).CreateAgent(ctx, dotlab.NewAgent{Name: "runner-huge", Operator: "web test", Capabilities: []string{"cpu", "tpu"}})
	if err != nil {
		t.Fatal(err)
	}
	s.keys["runner-huge"], s.ids["runner-huge"] = key, runner.ID
	c := must(sqlstoretest.Protocol(s.db).CreateClaim(ctx, s.ids["submitter"], sqlstoretest.NewClaim(t, "Huge difference", "tpu")))
	for i := 0; ; i++ {
		j, found, err := sqlstoretest.Protocol(s.db).NextJob(ctx, runner)
		if err != nil || !found || i == 10 {
			t.Fatalf("draw: %+v %v %v", j, found, err)
		}
		if j.ClaimID == c.ID {
			break
		}
		must(sqlstoretest.Protocol(s.db).DeclineJob(ctx, runner.ID, j.ClaimID, "capability_mismatch"))
	}
	must(sqlstoretest.Protocol(s.db).AcceptJob(ctx, runner.ID, c.ID))
	const maxF = "1.7976931348623157e308"
	run := must(sqlstoretest.Protocol(s.db).PublishRun(ctx, runner, sqlstoretest.RunBody(c.ID, maxF, "1.17", dotlab.OutcomeNotReproduced), nil))
	exact := string(run.Comparisons[0].Difference) // 1.7976931348623157e308 − 1.58
	if len(exact) < 300 || !strings.HasPrefix(exact, "179769313486231569999") {
		t.Fatalf("record difference %.80s… is not the exact difference", exact)
	}
	agrees := true
	ch := &dotlab.ChallengeBody{RunBody: *sqlstoretest.RunBody(c.ID, "-1.58", "1.17", dotlab.OutcomeNotReproduced), ClaimID: c.ID, Agrees: &agrees}
	ch.Notes = "mean_diff: my rerun gives -1.58, not 1.58 either"
	must(sqlstoretest.Protocol(s.db).CreateChallenge(ctx, &dotlab.Agent{ID: s.ids["challenger-bo"]}, ch, nil))

	longNumber := regexp.MustCompile(`[0-9]{40,}`)
	hash := regexp.MustCompile(`[0-9a-f]{64}`) // the fixtures' hashes may be all digits
	for _, path := range []string{"/claims/" + c.ID, "/runs/" + run.ID} {
		code, _, body := s.get(path, "text/html")
		if code != 200 {
			t.Fatalf("%s: status %d", path, code)
		}
		contains(t, path, body, "≈"+maxF)
		if strings.Contains(body, exact[:30]) {
			t.Errorf("%s shows the exact difference", path)
		}
		if m := longNumber.FindString(hash.ReplaceAllString(body, "")); m != "" {
			t.Errorf("%s shows a %d-digit number: %.60s…", path, len(m), m)
		}
	}
	// The challenge's delta (−1.58 − 1.7976931348623157e308) on the claim page.
	_, _, body := s.get("/claims/"+c.ID, "text/html")
	contains(t, "claim page delta", body, "≈-"+maxF)
	// The API keeps the exact record.
	var got dotlab.Run
	s.apiJSON("/api/v1/runs/"+run.ID, &got)
	if string(got.Comparisons[0].Difference) != exact {
		t.Fatalf("API difference %.60s… is not the exact record", string(got.Comparisons[0].Difference))
	}
}
