package leakcheck

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestPiecesBounds: no piece has a line longer than MaxLineBytes or is
// longer than MaxFragmentBytes, every stretch of LineOverlap bytes of a
// long line is whole in some piece, and short texts are not copied.
func TestPiecesBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	words := []string{"mean", "1.58", "sd", "1.17,", "(n", "=", "10)", "α", "Ñúñez", "\"t\":", "4.062;", strings.Repeat("x", 3000), "<b>", "µm"}
	for _, kind := range []string{"prose", "no breaks", "multibyte", "mixed lines"} {
		var b strings.Builder
		for b.Len() < 300<<10 {
			switch kind {
			case "prose":
				b.WriteString(words[r.IntN(len(words))] + " ")
			case "no breaks":
				b.WriteString(gen(r, b64, 64))
			case "multibyte":
				b.WriteString("αβγ€𝐠" + gen(r, alnum, r.IntN(8)))
			case "mixed lines":
				b.WriteString(gen(r, alnum+"  ", r.IntN(9000)) + "\n")
			}
		}
		text := b.String()
		ps := pieces(text)
		total := 0
		for _, p := range ps {
			total += len(p)
			if len(p) > MaxFragmentBytes {
				t.Errorf("%s: fragment of %d bytes", kind, len(p))
			}
			for line := range strings.Lines(p) {
				if n := len(strings.TrimSuffix(line, "\n")); n > MaxLineBytes {
					t.Errorf("%s: line of %d bytes", kind, n)
				}
			}
		}
		t.Logf("%s: %d bytes scanned as %d pieces, %d bytes (%.2f×)", kind, len(text), len(ps), total, float64(total)/float64(len(text)))
		if total > 2*len(text) {
			t.Errorf("%s: pieces total %d bytes for %d", kind, total, len(text))
		}
		for i := 0; i < 300; i++ {
			at := r.IntN(len(text) - LineOverlap)
			w := text[runeStart(text, at):runeStart(text, at+LineOverlap)]
			if strings.Contains(w, "\n") {
				continue
			}
			found := false
			for _, p := range ps {
				if strings.Contains(p, w) {
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("%s: the %d bytes at %d are in no piece", kind, len(w), at)
			}
		}
	}
	short := strings.Repeat("mean 1.58\n", 1000)
	if ps := pieces(short); len(ps) != 1 || ps[0] != short {
		t.Errorf("short text was cut")
	}
}

// TestTokenAtEveryCut moves secrets across the places where long lines are
// cut: each must be found wherever it lies.
func TestTokenAtEveryCut(t *testing.T) {
	if testing.Short() {
		t.Skip("takes several seconds")
	}
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(13, 14))
	ghp := "ghp_" + gen(r, alnum, 36)
	key := `api_key = "` + gen(r, alnum, 32) + `"`
	userinfo := "https://lab:" + gen(r, alnum, 16) + "@db.example.org/x"
	jwt := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + gen(r, alnum, 1500) + "." + gen(r, b64, 43)
	pemBody := ""
	for i := 0; i < 26; i++ {
		pemBody += gen(r, alnum, 64) + `\n`
	}
	oneLinePEM := `"private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC` + pemBody + `-----END PRIVATE KEY-----\n"`
	for i := 0; i < 26; i++ {
		pemBody += gen(r, alnum, 64) + `\n`
	}
	// An RSA-4096 key on one line is longer than a piece: gitleaks'
	// private-key rule spans the piece's line break within a fragment, and
	// private-key-material finds its header and first line of key material
	// in any piece.
	oneLinePEM4096 := `"private_key": "-----BEGIN RSA PRIVATE KEY-----\nMIIJKAIBAAKCAgEA` + pemBody + `-----END RSA PRIVATE KEY-----\n"`
	fillers := map[string]string{
		"prose":     strings.Repeat("mean 1.58 sd 1.17 n 10; ", 400),
		"no breaks": strings.Repeat("abcdefghijklmnopqrstuvwxyz", 400),
		"json":      strings.Repeat(`{"t":"2024-05-01T10:00:00Z","msg":"step compare"},`, 200),
	}
	secrets := map[string]string{"github pat": ghp, "generic key": key, "url userinfo": userinfo, "1.5 KiB jwt": jwt, "one-line PEM": oneLinePEM, "one-line RSA-4096 PEM": oneLinePEM4096}
	checked := 0
	for fname, filler := range fillers {
		for sname, s := range secrets {
			if sname == "1.5 KiB jwt" && fname == "no breaks" {
				continue // fused to the letters around it: a run longer than MaxLineBytes/2
			}
			for at := MaxLineBytes - len(s) - 64; at < MaxLineBytes+64; at += 1 + r.IntN(127) {
				text := filler[:at] + " " + s + " " + filler[at:]
				checked++
				if err := c.Check("$.body", text); err == nil {
					t.Fatalf("%s in %s at offset %d: not rejected", sname, fname, at)
				}
			}
		}
	}
	t.Logf("%d placements around the first cut rejected", checked)
}

// BenchmarkCheckOneLine: the check of one line without breaks is linear in
// its length (gitleaks on the whole line was quadratic: a 256 KiB line took
// about 111 s). Compare ns/byte of the two sizes side by side in one run:
// linear keeps them equal within the fragments' overlap (measured 16 KiB
// ≈ 6 µs/byte, 256 KiB ≈ 6–7 µs/byte); quadratic would multiply the second
// by 16. TestPiecesBounds asserts the structure that makes it linear (no
// piece over 4 KiB, a bounded overlap), so no timed test is needed.
func BenchmarkCheckOneLine(b *testing.B) {
	c, err := New()
	if err != nil {
		b.Fatal(err)
	}
	// Every 30 bytes a match of generic-api-key that its allowlist then
	// drops: no finding, so the whole text is scanned.
	unit := "api_version=aB3dE5gH7jK9mN1pQ "
	for _, n := range []int{16 << 10, 256 << 10} {
		s := repeatTo(unit, n)
		b.Run(fmt.Sprintf("bytes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				if err := c.Check("$.body", s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckLong measures the costs in docs/threat-model.md "Key leaks
// in rooms" (one iteration of the last 8 MiB case takes about a minute).
func BenchmarkCheckLong(b *testing.B) {
	c, err := New()
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(15, 16))
	var logs strings.Builder
	for logs.Len() < 8<<20 {
		logs.WriteString(`{"t":"2024-05-01T10:00:00Z","level":"info","step":"compare","msg":"mean 299.8524 sd 0.079 n=` + gen(r, digit, 4) + `"}` + "\n")
	}
	var b64lines strings.Builder
	for b64lines.Len() < 8<<20 {
		b64lines.WriteString(base64.StdEncoding.EncodeToString([]byte("mean 299.8524, sd 0.079 (n = "+gen(r, digit, 6)+")")) + "\n")
	}
	for _, tc := range []struct{ name, text string }{
		{"one-line-ordinary-256KiB", repeatTo("mean 299.8524, sd 0.079 (n = 100), sha256 ce4284663e0dd651af11f84b235024d07bac257707062c74b744935b27028445, ", 256<<10)},
		{"one-line-keyword-dense-256KiB", repeatTo("key=aB3dE5gH7jK9mN1pQ secret: token password api ", 256<<10)},
		{"one-line-allowlisted-matches-256KiB", repeatTo("api_version=aB3dE5gH7jK9mN1pQ ", 256<<10)},
		{"log-lines-8MiB", logs.String()[:8<<20]},
		{"base64-lines-8MiB", b64lines.String()[:8<<20]},
		{"allowlisted-match-lines-8MiB", repeatTo("api_version=aB3dE5gH7jK9mN1pQ\n", 8<<20)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				_ = c.Check("$.body", tc.text)
			}
		})
	}
}

// repeatTo repeats unit to exactly n bytes.
func repeatTo(unit string, n int) string { return strings.Repeat(unit, n/len(unit)+1)[:n] }
