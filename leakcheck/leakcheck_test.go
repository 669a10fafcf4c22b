package leakcheck

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sort"
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

// b64 and pct encode for the obfuscated corpus.
func b64std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func pctAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// insertEvery puts sep after every n bytes of s (ASCII s).
func insertEvery(s, sep string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s); i += n {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(s[i:min(i+n, len(s))])
	}
	return b.String()
}

// fullwidth maps printable ASCII to the fullwidth forms U+FF01..U+FF5E.
func fullwidth(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r > ' ' && r < 0x7f {
			r += 0xFF01 - '!'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// mathBold maps ASCII letters to MATHEMATICAL BOLD letters (U+1D400..).
func mathBold(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'A' && r <= 'Z':
			r = 0x1D400 + r - 'A'
		case r >= 'a' && r <= 'z':
			r = 0x1D41A + r - 'a'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// jsonEscape writes every byte of s as a \u00XX escape.
func jsonEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\u%04x`, s[i])
	}
	return b.String()
}

// obfuscatedSecrets are the adversarial review's forms (split or concatenated
// literals, invisible characters, look-alike prefixes, encodings, URL
// userinfo, the AWS example key id) and further variants of them.
func obfuscatedSecrets() map[string]string {
	r := rand.New(rand.NewPCG(7, 10))
	g := func(a string, n int) string { return gen(r, a, n) }
	ghp := "ghp_" + g(alnum, 36)
	dlk := "dlk_" + g(b64, 43)
	aws := "AKIA" + g(upper, 16)
	glpat := "glpat-" + g(alnum, 20)
	xoxb := "xoxb-" + g(digit, 11) + "-" + g(digit, 12) + "-" + g(alnum, 24)
	stripe := "sk_live_" + g(alnum, 24)
	return map[string]string{
		// split or concatenated literals
		"concat +":               `token = "ghp_" + "` + ghp[4:] + `"`,
		"concat + across lines":  "String t = \"" + ghp[:20] + "\" +\n        \"" + ghp[20:] + "\";",
		"python implicit concat": `TOKEN = ("ghp_" "` + ghp[4:] + `")`,
		"shell quote concat":     `export GH='ghp_'"` + ghp[4:] + `"`,
		"split over two lines":   "mirror token\n" + ghp[:22] + "\n" + ghp[22:] + "\nthanks",
		"split by spaces":        "token " + insertEvery(ghp, " ", 10),
		"split by tab and nbsp":  "id " + aws[:8] + "\t" + aws[8:14] + "\u00a0" + aws[14:],
		"backslash continuation": "curl -H 'x: " + dlk[:25] + "\\\n" + dlk[25:] + "'",
		"quote inside token":     "key " + glpat[:10] + `"` + glpat[10:] + `"`,
		// invisible characters
		"zero-width space U+200B": insertEvery(ghp, "\u200b", 5),
		"zwnj U+200C":             "gh\u200cp_" + ghp[4:],
		"zwj U+200D":              stripe[:3] + "\u200d" + stripe[3:],
		"word joiner U+2060":      insertEvery(xoxb, "\u2060", 7),
		"bom U+FEFF":              "AK\ufeffIA" + aws[4:],
		"soft hyphen U+00AD":      insertEvery(dlk, "\u00ad", 9),
		"mixed invisibles":        "g\u200bh\u00adp\u2060_\ufeff" + ghp[4:],
		"combining marks":         "g\u0301h\u0308p_" + ghp[4:],
		"variation selector":      "ghp\ufe0f_" + ghp[4:],
		"hangul filler":           "ghp_" + ghp[4:20] + "\u3164" + ghp[20:],
		// look-alike prefixes
		"fullwidth prefix":         fullwidth("ghp_") + ghp[4:],
		"fullwidth token":          "トークン " + fullwidth(ghp),
		"math bold prefix":         mathBold("ghp") + "_" + ghp[4:],
		"cyrillic er in ghр_":      "gh\u0440_" + ghp[4:],
		"cyrillic A in АKIA":       "\u0410KIA" + aws[4:],
		"greek Alpha in ΑKIA":      "\u0391KIA" + aws[4:],
		"cyrillic I in AKІA":       "AK\u0406A" + aws[4:],
		"cyrillic a in glpаt-":     "gl\u0440\u0430t-" + glpat[6:],
		"cyrillic o in xоxb-":      "x\u043exb-" + xoxb[5:],
		"cyrillic komi de in ԁlk_": "my key is \u0501lk_" + dlk[4:],
		// encodings
		"base64 token":             "decode this: " + b64std(ghp),
		"base64url unpadded":       base64.RawURLEncoding.EncodeToString([]byte("token " + dlk)),
		"base64 line-wrapped":      "blob:\n" + insertEvery(b64std("aws key "+aws+" for the bucket"), "\n", 16),
		"base64 of base64":         b64std(b64std(stripe)),
		"percent-encoded token":    "https://mirror.example.org/fetch?t=" + pctAll(ghp),
		"percent-encoded prefix":   "?access=ghp%5F" + ghp[4:],
		"repeated encoded run":     "a%5Fb\nq=ghp%5F" + ghp[4:],
		"percent with a stray %00": "q=ghp%5F" + ghp[4:] + "&pad=%00",
		"base64 of percent":        b64std(pctAll(xoxb)),
		"hex-encoded token":        "hex: " + hex.EncodeToString([]byte(ghp)),
		"json unicode escapes":     `{"body": "` + jsonEscape(dlk) + `"}`,
		"json escaped prefix":      `"\u0064lk_` + dlk[4:] + `"`,
		"html entities":            "&#103;&#104;&#112;&#95;" + ghp[4:],
		"html hex entities":        "&#x41;&#x4B;&#x49;&#x41;" + aws[4:],
		// URL userinfo
		"url userinfo":            "mirror at https://labuser:Tr0ub4dor-" + g(alnum, 6) + "@data.example.org/sleep.csv",
		"url userinfo postgres":   "DATABASE_URL is postgres://lab:" + g(alnum, 12) + "@db.example.org:5432/lab",
		"url userinfo empty user": "fetch https://:" + g(alnum, 20) + "@registry.example.org/v2/",
		"url userinfo base64":     b64std("https://runner:" + g(alnum, 14) + "@git.example.org/lab.git"),
		"url userinfo percent":    pctAll("https://u:" + g(alnum, 10) + "@h.example.org/"),
		// the documented example key id
		"aws example key id":        "AKIAIOSFODNN7EXAMPLE",
		"aws example in a sentence": "set aws_access_key_id = AKIAIOSFODNN7EXAMPLE in the config",
		// Markdown and HTML markup (the adversarial review)
		"markdown-escaped underscore": "ghp\\_" + ghp[4:],
		"markdown escapes throughout": `sk\_live\_` + stripe[8:],
		"markdown bold split":         "ghp_**" + ghp[4:20] + "**" + ghp[20:],
		"markdown italic split":       "ghp_*" + ghp[4:5] + "*" + ghp[5:],
		"markdown strikethrough":      "ghp_~~" + ghp[4:12] + "~~" + ghp[12:],
		"html empty tags inside":      "ghp_<b></b>" + ghp[4:],
		"html tags around a piece":    "ghp_<b>" + ghp[4:20] + "</b>" + ghp[20:],
		"html wbr every 8":            insertEvery(ghp, "<wbr>", 8),
		"html comment inside":         "dlk_" + dlk[4:20] + "<!-- x -->" + dlk[20:],
		"html span with attribute":    `ghp_<span class="k">` + ghp[4:] + "</span>",
		// concatenation operators of other languages
		"php dot concat":       `$t = "ghp_" . "` + ghp[4:] + `";`,
		"perl dot no spaces":   `my $t = 'ghp_'.'` + ghp[4:] + `';`,
		"lua .. concat":        `t = "ghp_" .. "` + ghp[4:] + `"`,
		"sql || concat":        `SELECT 'ghp_' || '` + ghp[4:] + `';`,
		"vb & concat":          `t = "ghp_" & "` + ghp[4:] + `"`,
		"three-piece php":      `"ghp_" . "` + ghp[4:20] + `" . "` + ghp[20:] + `"`,
		"sql || across a line": "'" + aws[:10] + "' ||\n'" + aws[10:] + "'",
		// userinfo without a scheme
		"userinfo no scheme":           "connect alice:hunter2" + g(alnum, 8) + "@db.example.org:5432",
		"userinfo no scheme ip":        "DB=root:" + g(alnum, 12) + "@10.0.0.5",
		"userinfo no scheme localhost": "mysql -h x lab:" + g(alnum, 10) + "@localhost",
		"private key without footer":   `"private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC` + g(alnum, 64) + `\n` + g(alnum, 30),
		// long lines (pieces.go)
		"token in a 300 KiB line":       strings.Repeat("mean 1.58 sd 1.17 n 10; ", 150<<10/24) + ghp + strings.Repeat(" t 4.062", 150<<10/8),
		"token after 64 KiB of letters": strings.Repeat("a", 64<<10) + " " + stripe,
		// combinations
		"zero-width + cyrillic + split": "gh\u0440\u200b_" + ghp[4:20] + "\n" + ghp[20:],
		"fullwidth base64":              fullwidth(b64std(ghp)),
		"base64 with zero-widths":       insertEvery(b64std(stripe), "\u200b", 6),
	}
}

// ordinaryMessages are the scientific messages of the finding's set and
// more: digests, commit ids, DOIs, units, p-values, code, URLs without
// credentials, base64 of ordinary text, Unicode scientific text.
var ordinaryMessages = []string{
	"sha256 a.csv ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445 b.csv 481f1729d83edd1f64454da9e22b3eb5d2cb46df9e00e797a61663055cd8efd4",
	"keys: ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445 481f1729d83edd1f64454da9e22b3eb5d2cb46df9e00e797a61663055cd8efd4",
	"token = 481f1729d83edd1f64454da9e22b3eb5d2cb46df9e00e797a61663055cd8efd4 v2",
	"commits:\n9fceb02d0ae598e95dc970b74767f19372d61af8\n0123456789abcdef0123456789abcdef01234567\nfedcba9876543210fedcba9876543210fedcba98",
	"DOIs 10.1234/abc.def and 10.1093/biomet/6.1.1; see also doi:10.1126/science.187.4175.398",
	"cell diameter 12.5 µm ± 0.3 µm, flow 3.2 × 10⁻⁵ mol/L at 37 °C, n = 24",
	"p < 0.001 for the main effect, p = 3.2e-5 after Holm, p = 0.0527 for the interaction (two-sided)",
	"fit <- lm(extra ~ group, data = sleep)\nsummary(fit)$coefficients[2, \"Pr(>|t|)\"]\nt.test(extra ~ group, data = sleep, paired = TRUE)",
	"import numpy as np\nd = np.array(x) - np.array(y)\nprint(f\"t = {d.mean() / (d.std(ddof=1) / np.sqrt(len(d))):.3f}\")\nresults[\"t_paired\"] = round(t, 4)",
	"msg = \"mean \" + str(m) + \" sd \" + str(s) + \" n \" + str(n_obs)",
	"source https://doi.org/10.1093/biomet/6.1.1 and https://github.com/dotlab/examples/archive/9fceb02d0ae598e95dc970b74767f19372d61af8.tar.gz",
	"search https://example.org/search?q=paired%20t%20test&lang=en%2Dgb and mail a.nunez@uni.example.org",
	"clone https://github.com/dotlab/examples.git or git@github.com:dotlab/examples.git, ssh://git@github.com/dotlab/examples",
	"summary (base64): " + base64.StdEncoding.EncodeToString([]byte("mean difference 1.58 h, sd 1.17, t = 4.062 on 9 df")),
	"α = 0.05, β = 0.2, μ = 1.58, σ = 1.17; power 1 − β = 0.8; Δ = μ₁ − μ₂; χ² = 3.84",
	"Ñúñez, Müller & Sørensen (2019) report 5.006 ± 0.35; Łukasiewicz and Dvořák agree",
	"Колмогоров (1933) и Смирнов (1939): критерий согласия, D = 0.214; ключ к результату — деление на n",
	"Η μέση τιμή είναι 4.062 και η τυπική απόκλιση 1.17 (Πίνακας ΙΙ, ΑΡΙΘΜΟΣ 3)",
	"ｐ値＝０．０５２７、平均差 1.58 時間（ｎ＝１０）",
	"the repro\u00adducibility check passed; a zero\u200bwidth space here is harmless",
	"5 &lt; 6 &amp;&amp; p &gt; 0.05, see &sect;3",
	"{\"t\":\"2024-05-01T10:00:00Z\",\"level\":\"info\",\"step\":\"compare\",\"msg\":\"token_count 1234 api_version 0.1\"}",
	"y = 2x + 3, R² = 0.97, AIC 1024.3 vs 1031.8; ANOVA F(2, 27) = 4.47",
	"echo \"sha256sum sleep.csv\" | tee log.txt && python3 analysis.py --seed 1908 --out /work/out",
	"table:\n1 0.7 1.9\n2 -1.6 0.8\n3 -0.2 1.1\n4 -1.2 0.1",
	"uuid 123e4567-e89b-12d3-a456-426614174000, ORCID 0000-0002-1825-0097, arXiv:2106.09685v2",
	"the image digest sha256:3d87b33775837455eee656307f24037dbd82d71922d2330b42278d173bea0179 is pinned",
	"url-encoded path /api/v1/runs/run_4k2j3h4g5f6d7s8a9q0w%2Flogs returns 404",
	// close to the Markdown, HTML, concatenation and userinfo variants
	"the **paired** t test gives `t = 4.062`; see *Student (1908)*, ~~0.35~~ **0.3035**, __n = 10__",
	"**Result:** `results.json` has **t_paired** = *4.0621* and `mean_diff` = 1.58",
	"<b>mean</b> 1.58<br/>sd 1.17 <!-- draft --> <span class=\"note\">n = 10</span>",
	"SELECT first_name || ' ' || last_name, a || b AS ab FROM authors WHERE x || y <> ''",
	"$msg = \"mean \" . $m . \" sd \" . $s; echo 'paired' . ' t' . ' test'; $k = 'lag' . '1';",
	"\"reproduced\" & \"verified\" in VB: label = \"run\" & \"_\" & \"compare\"",
	"mail jane.doe@example.org or a.nunez@uni.example.org about the rerun",
	"email:jane.doe@example.org, mailto:jane.doe@example.org, [Jane](mailto:jane@example.org)",
	"ssh lab@runner01.example.org, then scp results.json lab@10.0.0.5:/tmp/ and git push git@github.com:dotlab/examples.git",
	"fit <- lmer(y ~ x | g, data = d); m2 <- y ~ x + (1 | subject); a|b, a||b",
	"in LaTeX the p\\_value column, $\\alpha\\_1$ in Table\\_2, 50\\% of runs and \\{x\\}",
	"image python:3.12-slim@sha256:3d87b33775837455eee656307f24037dbd82d71922d2330b42278d173bea0179 pinned",
	"meeting at 10:30 with jane@example.org; ratio 3:1 at lab.example.org",
	"Access the public FTP: ftp://anonymous:guest@ftp.ncbi.nlm.nih.gov/genomes/",
	"mirror ftp://ftp:lab@ftp.example.org/pub/ and ftps://anonymous:jane%40example.org@ftp.example.org/",
	"2*x*y + 3*z, x**2, a*b; files *.csv and ~/data/*.tsv",
	// the review's ordinary messages
	"Reran with seed 20240117; the bootstrap CI is [1.48, 1.67] (B=10000).",
	"Protein sequence used: MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKALPDAQFEVVHSLAKWKRQTLGQHDFSAGEGLYTHMKALRPDEDRLSPLHSVYVDQWDWERVMGDGERQFSTLKSTVEAIWAGIKATEAAVSEEFGLAPFLPDQIHFVHSQELLSRYPDLDAKGRERAIAKDLGAVFLVGIGGKLSDGHRHDVRAPDYDDWSTPSELGHAGLNGDILVWNPVLEDAFELSSMGIRVDADTLKHALDQ",
	"DNA primer: ACGTTGCAACGTAGCTAGCTAGGCTAGCATCGATCGATCGACTAGCTAGCATCGACTAGC",
	"The API endpoint is https://api.example.org/v1/data?token=public (no auth needed)",
	"In R: token <- Sys.getenv(\"GITHUB_PAT\") # never paste the value",
	"In Python: api_key = os.environ['OPENAI_API_KEY']",
	"password = getpass.getpass()  # prompts the user",
	"Dataset mirror: s3://noaa-ghcn-pds/csv/by_year/1975.csv (public bucket)",
	"sha1: 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12; sha512 prefix cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce",
	"Secret sauce was the learning rate: secret_lr = 3e-4",
	"GenBank accession NC_045512.2 and NM_000546.6, PDB 6VXX",
	"zenodo record https://zenodo.org/records/10123456/files/data.csv?download=1",
	"Our Hugging Face dataset: huggingface.co/datasets/abc/def at revision 3f2a1b7c9d8e4f6a5b0c1d2e3f4a5b6c7d8e9f0a",
	"base64 of the config: eyJzZWVkIjogNDIsICJuIjogMTAwMCwgIm1vZGVsIjogImxtIn0=",
	"SMILES: CC(=O)OC1=CC=CC=C1C(=O)O and InChIKey BSYNRYMUTXBXSQ-UHFFFAOYSA-N",
	"The run log says: authorization: Bearer <redacted>",
	"Sample barcodes: AAACCTGAGAAACCAT-1 AAACCTGAGAAACCGC-1 AAACCTGAGAAACCTA-1",
	"Galaxy history id f2db41e1fa331b3e, workflow 1cd8e2f6b131e891",
	"Stripe test in the paper's appendix? no, it's a model id: sk-learn 1.3.2",
	"Conda env hash: sha256:3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a",
	"Cell line: HEK293T; antibody lot AB_2336877; RRID:SCR_002798",
	// long ordinary lines are cut into pieces without a false positive
	strings.Repeat("mean 299.8524, sd 0.0790105478190518, sha256 ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445, α = 0.05; ", 2000),
	strings.Repeat("ACGT", 64<<10),
}

// TestObfuscatedCorpus is the detector's corpus: every secret shape, plain
// and obfuscated, must be rejected (recall 100%) and every ordinary
// message accepted (no false positive).
func TestObfuscatedCorpus(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	secrets := secretMessages()
	obf := obfuscatedSecrets()
	if len(obf) < 40 {
		t.Fatalf("corpus has %d obfuscated forms, want >= 40", len(obf))
	}
	for k, v := range obf {
		secrets["obfuscated: "+k] = v
	}
	ordinary := append(append([]string(nil), labTalk...), ordinaryMessages...)
	if len(ordinaryMessages) < 12 {
		t.Fatalf("corpus has %d new ordinary messages, want >= 12", len(ordinaryMessages))
	}

	names := make([]string, 0, len(secrets))
	for k := range secrets {
		names = append(names, k)
	}
	sort.Strings(names)
	caught := 0
	for _, name := range names {
		m := secrets[name]
		err := c.Check("$.body", m)
		if err == nil {
			t.Errorf("MISSED %s: %q", name, m)
			continue
		}
		caught++
		if strings.Contains(err.Error(), m) {
			t.Errorf("%s: error echoes the secret", name)
		}
		t.Logf("rejected %-36s %v", name, c.Rules(m))
	}
	plain := 0 // obfuscated forms gitleaks finds in the text as written
	for _, m := range obf {
		if len(c.detector().DetectString(m)) > 0 {
			plain++
		}
	}
	t.Logf("without variants gitleaks alone rejects %d/%d obfuscated forms", plain, len(obf))
	fps := 0
	for _, m := range ordinary {
		if rules := c.Rules(m); len(rules) > 0 {
			fps++
			t.Errorf("FALSE POSITIVE (rules %v): %q", rules, m)
		}
	}
	t.Logf("summary: recall %d/%d (%.1f%%), of them %d obfuscated; false positives %d/%d",
		caught, len(secrets), 100*float64(caught)/float64(len(secrets)), len(obf), fps, len(ordinary))
}

// TestBareSigningKeyRejected: a DotLab agent's signing key is an Ed25519
// PKCS #8 PEM file (attest.Key.Save); its body alone — the lines between
// the header and the footer, the first thing a hostile text would ask an
// agent to paste "without the header lines" — and its DER in hex are
// rejected too, though no gitleaks rule knows them without the header.
func TestBareSigningKeyRejected(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(25519, 8))
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(r.IntN(256))
	}
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"PEM body":           base64.StdEncoding.EncodeToString(der),
		"PEM body, URL-safe": "here: " + base64.URLEncoding.EncodeToString(der) + " done",
		"DER in hex":         hex.EncodeToString(der),
	} {
		if err := c.Check("$.body", text); err == nil {
			t.Errorf("%s: not rejected: %q", name, text)
		}
	}
}
