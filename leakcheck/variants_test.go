package leakcheck

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestFold(t *testing.T) {
	ft := newFoldTable()
	for in, want := range map[string]string{
		"gh\u0440_":                "ghp_", // Cyrillic er
		"\u0410K\u0406A":           "AKIA", // Cyrillic A and I: upper-case I, not the skeleton's "l"
		"\u0456d":                  "id",   // Cyrillic i: lower-case i
		"\uff47\uff48\uff50\uff3f": "ghp_", // fullwidth (NFKC)
		"a\u200bb\u00adc\ufeffd\u2060e\u200c\u200df": "abcdef",
		"g\u0301":    "g",           // combining mark removed
		"x\u00a0y":   "x y",         // NBSP is a space
		"3×4 µm":     "3x4 \u03bcm", // only the variant changes
		`ghp\_ab\*c`: "ghp_ab*c",    // Markdown escapes undone
		`a\\_b`:      `a\_b`,        // an escaped backslash is one backslash
		`C:\data\x`:  `C:\data\x`,   // a backslash before a letter stays
		`\u0041`:     `\u0041`,
	} {
		if got := ft.fold(in); got != want {
			t.Errorf("fold(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestJoin(t *testing.T) {
	ft := newFoldTable()
	for in, want := range map[string]string{
		`"ghp_" + "abc123"`:                `"ghp_abc123"`,
		`"ghp_" "abc123"`:                  `"ghp_abc123"`,
		"ghp_Ab12\nCd34":                   "ghp_Ab12Cd34",
		"ghp_Ab12 Cd34 Ef56":               "ghp_Ab12Cd34Ef56",
		"a1b2\\\nc3d4":                     "a1b2c3d4",
		"the key is on the table":          "the key is on the table", // prose stays apart
		"a+b":                              "a+b",                     // bare "+" is not concatenation
		`"ghp_" . "abc1"`:                  `"ghp_abc1"`,
		`'ghp_'.'abc1'`:                    `'ghp_abc1'`,
		`'ghp_' || 'abc1'`:                 `'ghp_abc1'`,
		`"ghp_" & "abc1"`:                  `"ghp_abc1"`,
		`"ghp_" .. "abc1"`:                 `"ghp_abc1"`,
		"ghp_**ab**c1":                     "ghp_abc1",
		"ghp_<b></b>ab<!-- x -->c1<wbr>d2": "ghp_abc1d2",
		`ghp_<span class="k">ab</span>`:    "ghp_ab</span>",      // only between fragments
		"the **bold** words":               "the **bold** words", // markup between plain words stays
		"a || b, x | g, np.array, a . b":   "a || b, x | g, np.array, a . b",
		"2*x, a*b, 3 * 4, y ~ x":           "2x, a*b, 3 * 4, y ~ x", // "2" is token-like
		"a <b> c":                          "a <b> c",
		"token 0.05 p":                     "token 0.05 p",
		"ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445 v2": "ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445 v2",
	} {
		if got := ft.join(in); got != want {
			t.Errorf("join(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDecodeDepth: MaxDecodeDepth layers are peeled, one more is not (the
// bound is documented as a known limit).
func TestDecodeDepth(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	s := "sk_live_" + gen(r, alnum, 24)
	for depth := 1; depth <= MaxDecodeDepth+1; depth++ {
		s = base64.StdEncoding.EncodeToString([]byte(s))
		err := c.Check("$.body", s)
		if depth <= MaxDecodeDepth && err == nil {
			t.Errorf("%d layers of base64: not rejected", depth)
		}
		if depth > MaxDecodeDepth && err != nil {
			t.Errorf("%d layers of base64: rejected (%v); update MaxDecodeDepth's docs", depth, err)
		}
	}
}

// TestVariantBudget: a text whose variants would pass the bound is refused,
// and refusing it is fast.
func TestVariantBudget(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	// U+FDFA expands to 18 characters (33 bytes) under NFKC.
	bomb := strings.Repeat("\ufdfa", (64<<10)/3)
	start := time.Now()
	err = c.Check("$.body", bomb)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "over the limit of") {
		t.Fatalf("NFKC expansion bomb: got %v, want refusal naming the limit", err)
	}
	t.Logf("64 KiB NFKC bomb refused in %v: %v", took, err)
	if got := c.Rules(bomb); len(got) != 1 || got[0] != "variant-budget" {
		t.Errorf("Rules(bomb) = %v", got)
	}
	// Ordinary text far from the bound passes.
	if err := c.Check("$.body", strings.Repeat("Ñúñez α β μ σ ± × µm 12.5 p < 0.001\n", 1000)); err != nil {
		t.Errorf("ordinary Unicode text refused: %v", err)
	}
}

// TestKnownLimits pins what still passes (docs: "what is still known to
// pass"). If one of these starts being rejected, update the docs.
func TestKnownLimits(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	ghp := "ghp_" + gen(r, alnum, 36)
	for name, m := range map[string]string{
		"split into array items":     `["ghp_", "` + ghp[4:] + `"].join("")`,
		"split across two messages":  ghp[:20],
		"reversed":                   reverse(ghp),
		"word-like pieces by spaces": "ghp_ abcdefgh ijklmnop qrstuvwx yzabcdef ghij",
		"one character per piece":    strings.Join(strings.Split("AKIAQ3EGUVFH7XKR2PLM", ""), "."),
		"lower-cased":                strings.ToLower("AKIAQ3EGUVFH7XKR2PLM"),
		"octal escapes":              `\147\150\160\137` + ghp[4:],
		"punctuation inserted":       ghp[:20] + "…" + ghp[20:],
		"upper-cased":                strings.ToUpper(ghp),
		"function arguments":         `paste0("ghp_", "` + ghp[4:] + `")`,
	} {
		if err := c.Check("$.body", m); err != nil {
			t.Errorf("%s: now rejected (%v); update the known limits in the docs", name, err)
		}
	}
}

// TestKnownFalsePositives pins ordinary-looking texts that are rejected by
// design (docs: "False positives by design").
func TestKnownFalsePositives(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]string{
		// Hex values of 20 to 39 characters after "key", "token", "secret"
		// … are ambiguous: 32 hex digits are an MD5 digest or a Datadog,
		// Algolia or Mailgun API key. Only 40 and 64 hex digits (commit ids,
		// SHA-256) are exempt.
		"20 hex digits after key": `Hash key for the lookup table: key = "a7f3c9e1b2d4f6a8c0e2"`,
		"md5 after key":           `key = "9e107d9d372bb6826bd81d3542a419d6"`,
		"placeholder password":    "postgres://user:password@localhost/db",
		"placeholder no scheme":   "connect user:password@localhost",
		"aws example key id":      "AKIAIOSFODNN7EXAMPLE",
	} {
		if err := c.Check("$.body", m); err == nil {
			t.Errorf("%s: now accepted; update the false positives in the docs", name)
		}
	}
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

func message64KiB(r *rand.Rand, kind string) string {
	var b strings.Builder
	for b.Len() < 64<<10 {
		switch kind {
		case "encoded":
			// every line base64 of ordinary text: decoded and scanned
			b.WriteString(base64.StdEncoding.EncodeToString([]byte("mean 299.8524, sd 0.079 (n = "+gen(r, digit, 6)+"), α = 0.05")) + "\n")
		case "hostile":
			// every trick at once: encodings, invisibles, look-alikes, splits
			s := base64.StdEncoding.EncodeToString([]byte(gen(r, alnum, 30)))
			b.WriteString(s + " %41%42 \\u0041 &#65; \u200b\u0440\u0410 \uff41 " + gen(r, alnum, 8) + "\n" + gen(r, alnum, 8) + " ")
		default:
			b.WriteString("mean 299.8524, sd 0.079 (n = 100), sha256 ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445, α = 0.05, Ñúñez et al., https://doi.org/10.1093/biomet/6.1.1\n")
		}
	}
	return b.String()[:64<<10]
}

func BenchmarkCheck64KiB(b *testing.B) {
	c, err := New()
	if err != nil {
		b.Fatal(err)
	}
	// ordinary: no encodings; encoded: every line decodes; hostile: every
	// trick on every line (refused at the variant bound).
	for _, name := range []string{"ordinary", "encoded", "hostile"} {
		m := message64KiB(rand.New(rand.NewPCG(8, 9)), name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(m)))
			for b.Loop() {
				_ = c.Check("$.body", m)
			}
		})
	}
}
