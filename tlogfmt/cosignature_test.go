package tlogfmt_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/tlogfmt"
	"golang.org/x/mod/sumdb/note"
)

// cosign makes a cosignature/v1 line by key named name on text at ts, as
// c2sp.org/tlog-cosignature specifies.
func cosign(name string, key ed25519.PrivateKey, id uint32, text string, ts uint64) string {
	sig := ed25519.Sign(key, tlogfmt.CosignedMessage([]byte(text), ts))
	raw := binary.BigEndian.AppendUint32(nil, id)
	raw = binary.BigEndian.AppendUint64(raw, ts)
	return "— " + name + " " + base64.StdEncoding.EncodeToString(append(raw, sig...)) + "\n"
}

// TestCosignatureV1: a cosignature/v1 line verifies with its witness key
// and its timestamp is read; another text, timestamp or key does not; keys
// of another type or with a wrong key id are refused.
func TestCosignatureV1(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	vkey := tlogfmt.CosignatureVerifierKey("witness.example/w1", pub)
	v, err := tlogfmt.NewCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	text := "example.com/log\n20\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
	lines, err := tlogfmt.SignatureLines(cosign(v.Name(), priv, v.KeyHash(), text, 1679315147))
	if err != nil {
		t.Fatal(err)
	}
	at, ok := v.Check(text, lines[0])
	if !ok || at.Unix() != 1679315147 {
		t.Fatalf("check: %v %v", at, ok)
	}
	if _, ok := v.Check(strings.Replace(text, "20", "21", 1), lines[0]); ok {
		t.Fatal("a cosignature verified on another checkpoint")
	}
	forged, _ := tlogfmt.SignatureLines(cosign(v.Name(), priv, v.KeyHash(), text, 1)) // signed at 1, claimed at another time below
	raw, _ := base64.StdEncoding.DecodeString(forged[0].Base64)
	binary.BigEndian.PutUint64(raw[4:], 2)
	if _, ok := v.Check(text, note.Signature{Name: v.Name(), Hash: v.KeyHash(), Base64: base64.StdEncoding.EncodeToString(raw)}); ok {
		t.Fatal("a cosignature verified with its timestamp changed")
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	stranger, _ := tlogfmt.SignatureLines(cosign(v.Name(), other, v.KeyHash(), text, 1679315147))
	if _, ok := v.Check(text, stranger[0]); ok {
		t.Fatal("another key's cosignature verified")
	}
	_, logKey, _ := note.GenerateKey(rand.Reader, "witness.example/w1")
	for _, bad := range []string{logKey, strings.Replace(vkey, "+", "+0", 1)[:len(vkey)], "no-plus", vkey[:strings.LastIndex(vkey, "+")] + "+AAAA"} {
		if _, err := tlogfmt.NewCosignatureVerifier(bad); err == nil {
			t.Errorf("witness key %q accepted", bad)
		}
	}
	if _, err := tlogfmt.SignatureLines("— w AAAA\nnot a signature\n"); err == nil {
		t.Error("a line that is no signature line was accepted")
	}
}
