package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/apiv1"
)

// TestObfuscatedSecretsNeverReachARoom (the adversarial review's obfuscated forms, end to end): a
// token hidden by zero-width characters, look-alike letters, a split
// literal, base64 or URL userinfo is refused by POST /labs/{id}/messages
// (422 naming the rule, not the text) and never stored, while ordinary
// lab talk in the same room is published unchanged.
func TestObfuscatedSecretsNeverReachARoom(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *env) {
		_, subKey := e.register("submitter")
		_, runnerKey := e.register("runner")
		id := e.assigned(subKey, runnerKey, "obfuscated secrets")
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/join", runnerKey, map[string]string{"role": "runner"}), 200, "")
		token := "ghp_R8kq2Lm9Zt4Wx7Vb1Nc6Hy3Jp0Qs5Df8Ga2K"
		hostile := []string{
			"use gh\u200bp_" + token[4:],
			"use ghp\u00ad_" + token[4:],
			"use g\u0068\u0440_" + token[4:], // Cyrillic р
			"ｇｈｐ＿" + token[4:],
			`key = "` + token[:10] + `" + "` + token[10:] + `"`,
			"encoded: " + base64.StdEncoding.EncodeToString([]byte(token)),
			"mirror: https://runner:s3cretPassw0rd@data.example.org/x.csv",
			"aws AKIAIOSFODNN7EXAMPLE",
		}
		for _, body := range hostile {
			r := e.do("POST", "/api/v1/labs/"+id+"/messages", runnerKey, map[string]any{"type": "note", "to": "all", "body": body})
			expect(t, r, 422, "invalid")
			if d := strings.Join(r.err().Detail, " "); strings.Contains(d, token[8:20]) || strings.Contains(d, "s3cretPassw0rd") {
				t.Fatalf("the detail echoes the secret: %q", d)
			}
		}
		ordinary := "sd_diff rerun 1.2299 (n−1), sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855, see https://doi.org/10.1093/biomet/6.1.1 — μ ± σ"
		expect(t, e.do("POST", "/api/v1/labs/"+id+"/messages", runnerKey, map[string]any{"type": "finding", "to": "all", "body": ordinary}), 201, "")
		r := e.do("GET", "/api/v1/labs/"+id+"/messages", "", nil)
		var page apiv1.MessagePage
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for _, m := range page.Messages {
			if m.Type == "finding" || m.Type == "note" {
				bodies = append(bodies, m.Body)
			}
		}
		if len(bodies) != 1 || bodies[0] != ordinary {
			t.Fatalf("room holds %q, want only the ordinary message unchanged", bodies)
		}
	})
}
