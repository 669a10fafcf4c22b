package leakcheck

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// gen returns n random characters from alphabet, deterministic per seed, so
// that no real credential is ever in this file.
func gen(r *rand.Rand, alphabet string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

const (
	alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	hexl  = "0123456789abcdef"
	digit = "0123456789"
	b64   = alnum + "-_"
)

// secretMessages are realistic key and token shapes pasted into lab talk.
func secretMessages() map[string]string {
	r := rand.New(rand.NewPCG(1, 2))
	g := func(a string, n int) string { return gen(r, a, n) }
	return map[string]string{
		"github pat":             "runner token for the mirror: ghp_" + g(alnum, 36),
		"github oauth":           "use gho_" + g(alnum, 36) + " for the clone",
		"github app token":       "ghs_" + g(alnum, 36),
		"github refresh":         "ghr_" + g(alnum, 36),
		"github fine-grained":    "github_pat_" + g(alnum, 22) + "_" + g(alnum, 59),
		"gitlab pat":             "glpat-" + g(alnum, 20),
		"aws access key":         "aws creds: AKIA" + g(upper, 16),
		"slack bot token":        "xoxb-" + g(digit, 11) + "-" + g(digit, 12) + "-" + g(alnum, 24),
		"slack webhook":          "https://hooks.slack.com/services/T" + g(upper, 8) + "/B" + g(upper, 8) + "/" + g(alnum, 24),
		"stripe live key":        "sk_live_" + g(alnum, 24),
		"stripe restricted":      "rk_live_" + g(alnum, 24),
		"google api key":         "AIza" + g(b64, 35),
		"sendgrid":               "SG." + g(b64, 22) + "." + g(b64, 43),
		"npm token":              "//registry.npmjs.org/:_authToken=npm_" + g(alnum, 36),
		"pypi token":             "pypi-AgEIcHlwaS5vcmc" + g(b64, 70),
		"openai key":             "OPENAI_API_KEY=sk-proj-" + g(b64, 74) + "T3BlbkFJ" + g(b64, 74),
		"anthropic key":          "sk-ant-api03-" + g(b64, 93) + "AA",
		"private key block":      "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA" + g(alnum, 64) + "\n" + g(alnum, 64) + "\n-----END RSA PRIVATE KEY-----",
		"openssh private key":    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" + g(alnum, 60) + "\n-----END OPENSSH PRIVATE KEY-----",
		"jwt":                    "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ." + g(b64, 43),
		"generic api key":        `api_key = "` + g(alnum, 32) + `"`,
		"generic secret":         `client_secret: "` + g(alnum, 40) + `"`,
		"generic token env":      "export AUTH_TOKEN=" + g(alnum, 40),
		"postman api key":        "PMAK-" + g(hexl, 24) + "-" + g(hexl, 34),
		"hugging face":           "hf_" + g("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 34),
		"digitalocean":           "dop_v1_" + g(hexl, 64),
		"shopify":                "shpat_" + g(hexl, 32),
		"doppler":                "dp.pt." + g(alnum, 43),
		"gcp service account":    `{"type": "service_account", "private_key_id": "` + g(hexl, 40) + `", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC` + g(alnum, 60) + `\n-----END PRIVATE KEY-----\n"}`,
		"pulumi token":           "pul-" + g(hexl, 40),
		"twilio":                 "twilio api key SK" + g(hexl, 32),
		"azure storage":          "DefaultEndpointsProtocol=https;AccountName=lab;AccountKey=" + g(alnum, 86) + "==;EndpointSuffix=core.windows.net",
		"databricks":             "dapi" + g(hexl, 32),
		"linear":                 "lin_api_" + g(alnum, 40),
		"dotlab api key":         "my key is dlk_" + g(b64, 43),
		"dotlab-like bearer key": `curl -H "Authorization: Bearer ` + g(b64, 43) + `"`,
	}
}

// labTalk is ordinary scientific conversation: numbers, data hashes, commit
// ids, DOIs, URLs, code, tables.
var labTalk = []string{
	"key: ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445 (the sha256 of sleep.csv)",
	"token = 481f1729d83edd1f64454da9e22b3eb5d2cb46df9e00e797a61663055cd8efd4",
	"secret sauce commit: 9fceb02d0ae598e95dc970b74767f19372d61af8",
	"sha256 of sleep.csv: ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445 matches the manifest",
	"darwin.csv hashes to 481f1729d83edd1f64454da9e22b3eb5d2cb46df9e00e797a61663055cd8efd4 here too",
	"checked out commit 9fceb02d0ae598e95dc970b74767f19372d61af8 of the analysis repository",
	"the image digest is sha256:3d87b33775837455eee656307f24037dbd82d71922d2330b42278d173bea0179",
	"Source: Student (1908), Biometrika 6(1):1-25, doi:10.1093/biomet/6.1.1",
	"See https://doi.org/10.1126/science.187.4175.398 for the Bickel data",
	"paired t = 4.062 on 9 df; mean difference 1.58 h, sd 1.17 (dividing by n)",
	"sd with n-1 is 1.2299, outside the 0.005 tolerance on 1.17",
	"randomisation test: 1726 of 32768 sign patterns have |sum| >= 314, p = 0.05267",
	"mean 299.8524, sd 0.0790105478190518, lag-1 autocorrelation 0.535199668621283",
	"women admitted 557/1835 = 0.3035, the published 0.35 is the campus-wide rate",
	"results.json: {\"t_paired\": 4.0621, \"mean_diff\": 1.58}",
	"blocker: python3 -c 'import statistics' fails in the image, module missing",
	"handoff: rerun with DOTLAB_SEED=1908, next step is compare step for sd_diff",
	"question: is the tolerance on t_paired absolute 0.0005 or relative?",
	"finding: row 17 of morley.csv has Speed 1070, step verify, value differs from the 1879 table",
	"logs at https://dotlab.example.org/api/v1/runs/run_4k2j3h4g5f6d7s8a9q0w/logs line 42",
	"git log --oneline: a1b2c3d fix off-by-one in the lag computation",
	"the key result is the t statistic; the secret to matching is dividing by n",
	"token count in the corpus: 1,234,567 tokens across 3 files",
	"api version 0.1; GET /api/v1/claims/DL-0003 returns state challenge_window",
	"password-protected archives are not supported by the runner, use tar.gz",
	"iris setosa means 5.006, 3.428, 1.462, 0.246 (cm), Fisher 1936 Table II",
	"md5 of the old file was 9e107d9d372bb6826bd81d3542a419d6 before the fix",
	"uuid of the upload: 123e4567-e89b-12d3-a456-426614174000",
	"ORCID 0000-0002-1825-0097 is the corresponding author",
	"arXiv:2106.09685v2 reports 0.912 +/- 0.004",
	"the seed 1908 reproduces; seed 42 gives t = 4.062 too (deterministic)",
	"memory limit 1024 MB, timeout 600 s, cpus 1",
	"ISBN 978-0-12-345678-6 is the edition with the corrected table",
	"cross-check: sum(y) = 314 eighths of an inch over 15 pairs",
	"entrypoint [\"python3\", \"analysis.py\"] exits 0 in 0.8 s",
	"commit ids 0123456789abcdef0123456789abcdef01234567 and fedcba9876543210fedcba9876543210fedcba98 differ in analysis.py only",
}

func TestSecretsRejected(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	msgs := secretMessages()
	if len(msgs) < 30 {
		t.Fatalf("corpus has %d secret shapes, want >= 30", len(msgs))
	}
	for name, m := range msgs {
		if err := c.Check("$.body", m); err == nil {
			t.Errorf("%s: not rejected: %q", name, m)
		} else if strings.Contains(err.Error(), m) {
			t.Errorf("%s: error echoes the secret", name)
		}
	}
}

func TestLabTalkAccepted(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if len(labTalk) < 30 {
		t.Fatalf("corpus has %d messages, want >= 30", len(labTalk))
	}
	for _, m := range labTalk {
		if rules := c.Rules(m); len(rules) > 0 {
			t.Errorf("rejected ordinary lab talk (rules %v): %q", rules, m)
		}
	}
}
