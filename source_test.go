package dotlab

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseJSONPath(t *testing.T) {
	for in, want := range map[string][]PathStep{
		"$":                          nil,
		"$.coef.did":                 {{Key: "coef", Index: -1}, {Key: "did", Index: -1}},
		`$.rows[1]["(Intercept)"]`:   {{Key: "rows", Index: -1}, {Index: 1}, {Key: "(Intercept)", Index: -1}},
		`$["a.b"][0][10]`:            {{Key: "a.b", Index: -1}, {Index: 0}, {Index: 10}},
		`$.x_1-y["quote \" in key"]`: {{Key: "x_1-y", Index: -1}, {Key: `quote " in key`, Index: -1}},
	} {
		got, err := ParseJSONPath(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "a.b", "$.", "$..a", "$[01]", "$[-1]", "$[x]", `$["a"`, `$["a"x]`, "$.a b", "$" + strings.Repeat(".a", 600)} {
		if _, err := ParseJSONPath(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestEvaluateRunHelpersAndCode: a compared run shows every helper's hash
// under "helper:<name>"; a reported code commit or archive hash must be the
// manifest's.
func TestEvaluateRunHelpersAndCode(t *testing.T) {
	const h = "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445"
	commit := strings.Repeat("ab", 20)
	m := &Manifest{
		Helpers: []Helper{{Name: "adapter", SHA256: h}},
		Code:    Code{Repository: "https://example.org/r.git", Commit: commit},
		Targets: []Target{{Name: "x", Value: "1", Tolerance: Tolerance{Type: "absolute", Value: "0"}}},
	}
	body := func() *RunBody {
		return &RunBody{InputHashes: map[string]string{"helper:adapter": h}, Outcome: OutcomeReproduced,
			Environment: RunEnvironment{CodeCommit: commit}, Comparisons: []RunComparison{{Name: "x", Rerun: "1"}}}
	}
	if _, err := EvaluateRun(m, body()); err != nil {
		t.Fatal(err)
	}
	for want, mutate := range map[string]func(*RunBody){
		"missing helper":                     func(b *RunBody) { delete(b.InputHashes, "helper:adapter") },
		`$.input_hashes["helper:adapter"]`:   func(b *RunBody) { b.InputHashes["helper:adapter"] = strings.Repeat("0", 64) },
		`$.input_hashes["helper:other"]`:     func(b *RunBody) { b.InputHashes["helper:other"] = h },
		"$.environment.code_commit: is":      func(b *RunBody) { b.Environment.CodeCommit = strings.Repeat("cd", 20) },
		"$.environment.code_commit: must":    func(b *RunBody) { b.Environment.CodeCommit = "abc" },
		"$.environment.code_archive_sha256:": func(b *RunBody) { b.Environment.CodeArchiveSHA256 = h },
	} {
		b := body()
		mutate(b)
		_, err := EvaluateRun(m, b)
		if err == nil || !strings.Contains(strings.Join(ErrorDetail(err), "\n"), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	// A spec_issue run may show a helper hash that differs (it says why it stopped).
	b := body()
	b.Outcome, b.Notes, b.Comparisons = OutcomeSpecIssue, "helper adapter: expected …", nil
	b.InputHashes["helper:adapter"] = strings.Repeat("0", 64)
	if _, err := EvaluateRun(m, b); err != nil {
		t.Fatalf("spec_issue with a helper mismatch: %v", err)
	}
}
