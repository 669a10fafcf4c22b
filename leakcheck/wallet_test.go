package leakcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	bip39 "github.com/cosmos/go-bip39"
)

// base58CheckEncode is the encoder the tests need to make keys (the
// package itself only decodes).
func base58CheckEncode(payload []byte) string {
	h1 := sha256.Sum256(payload)
	h2 := sha256.Sum256(h1[:])
	b := append(append([]byte(nil), payload...), h2[:4]...)
	n := new(big.Int).SetBytes(b)
	var out []byte
	mod, radix := new(big.Int), big.NewInt(58)
	for n.Sign() > 0 {
		n.DivMod(n, radix, mod)
		out = append(out, base58Alphabet[mod.Int64()])
	}
	for _, c := range b {
		if c != 0 {
			break
		}
		out = append(out, '1')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

// extKey is a serialized BIP-32 extended key: version, depth,
// fingerprint, child number, chain code, key data (0x00 + 32 bytes).
func extKey(r *rand.Rand, version []byte) string {
	p := append(append([]byte(nil), version...), 3)
	p = append(p, randBytes(r, 8+32)...)
	p = append(p, 0)
	return base58CheckEncode(append(p, randBytes(r, 32)...))
}

func walletSecrets(t *testing.T) map[string]string {
	r := rand.New(rand.NewPCG(39, 32))
	wif := func(version byte, compressed bool) string {
		p := append([]byte{version}, randBytes(r, 32)...)
		if compressed {
			p = append(p, 1)
		}
		return base58CheckEncode(p)
	}
	mnemonic := func(n int) string {
		m, err := bip39.NewMnemonic(randBytes(r, n))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	hex64 := func() string { return hex.EncodeToString(randBytes(r, 32)) }
	m12, m24 := mnemonic(16), mnemonic(32)
	return map[string]string{
		"0x wallet key":             "my wallet: 0x" + hex64(),
		"0x wallet key, upper":      "KEY 0X" + strings.ToUpper(hex64()) + ".",
		"ETH_PRIVATE_KEY=":          "ETH_PRIVATE_KEY=" + hex64(),
		"private_key=":              "private_key=" + hex64(),
		"private key: quoted":       `"private_key": "` + hex64() + `"`,
		"wallet key is":             "the wallet key is " + hex64(),
		"secret key":                "secret key " + hex64(),
		"WIF uncompressed":          "import " + wif(0x80, false) + " into the wallet",
		"WIF compressed":            "wif: " + wif(0x80, true),
		"WIF testnet":               wif(0xef, true),
		"xprv":                      "xprv for the faucet " + extKey(r, []byte{0x04, 0x88, 0xad, 0xe4}),
		"tprv":                      extKey(r, []byte{0x04, 0x35, 0x83, 0x94}),
		"zprv":                      "(" + extKey(r, []byte{0x04, 0xb2, 0x43, 0x0c}) + ")",
		"BIP-39 12 words":           "seed words: " + m12,
		"BIP-39 24 words":           m24,
		"BIP-39 numbered":           numbered(m12),
		"BIP-39 capitalised, comma": strings.ReplaceAll(strings.ToUpper(m12[:1])+m12[1:], " ", ", "),
		"BIP-39 amid wordlist text": "abandon about " + mnemonic(20) + " zoo",
		"Bearer 40 hex":             "Authorization: Bearer " + hex.EncodeToString(randBytes(r, 20)),
		"curl bearer":               `curl -H 'authorization: bearer ` + gen(r, b64, 30) + `' https://lab.test/`,
		"token header":              "Authorization: token " + hex.EncodeToString(randBytes(r, 20)),
	}
}

func numbered(m string) string {
	var b strings.Builder
	for i, w := range strings.Fields(m) {
		b.WriteString(strings.Repeat(" ", min(i, 1)))
		b.WriteString(string(rune('1'+i%9)) + ". " + w)
	}
	return b.String()
}

// walletLookalikes are ordinary texts of the same shapes: digests, a bare
// SHA-256 labelled "token" or "key", addresses, public extended keys, a
// seed phrase whose checksum fails, word-list prose.
func walletLookalikes(t *testing.T) []string {
	r := rand.New(rand.NewPCG(7, 11))
	addr := base58CheckEncode(append([]byte{0x00}, randBytes(r, 20)...))
	xpub := extKey(r, []byte{0x04, 0x88, 0xb2, 0x1e})
	badWIF := []byte(base58CheckEncode(append([]byte{0x80}, randBytes(r, 32)...)))
	badWIF[10] = map[bool]byte{true: 'A', false: 'B'}[badWIF[10] != 'A']
	m, err := bip39.NewMnemonic(randBytes(r, 16))
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(m)
	var broken string
	for _, w := range []string{"zoo", "abandon", "ability", "able", "about", "above", "absent"} {
		words[11] = w
		if _, err := bip39.MnemonicToByteArray(strings.Join(words, " ")); err != nil {
			broken = strings.Join(words, " ")
			break
		}
	}
	if broken == "" {
		t.Fatal("no word breaks the checksum")
	}
	return []string{
		"sha256 " + hex.EncodeToString(randBytes(r, 32)),
		hex.EncodeToString(randBytes(r, 32)),
		"token = " + hex.EncodeToString(randBytes(r, 32)),
		"key: " + hex.EncodeToString(randBytes(r, 32)) + " (the sha256 of data.csv)",
		"input_mismatch: expected " + hex.EncodeToString(randBytes(r, 32)) + " got " + hex.EncodeToString(randBytes(r, 32)),
		"contract at 0x" + hex.EncodeToString(randBytes(r, 20)),
		"bitcoin address " + addr,
		"xpub " + xpub,
		"a checksum that fails: " + string(badWIF),
		"checksum fails: " + broken,
		"the public key of the runner is registered; key id " + hex.EncodeToString(randBytes(r, 16)),
		"Authorization: Bearer <your key>",
		"we found able people above average, about twelve of them, in the early morning survey of the city",
		"abandon ability able about above absent absorb abstract absurd abuse access accident account accuse",
	}
}

// TestWalletSecretsRejected: each secret kind the skill text names first
// is refused (recall on every kind), while same-shaped ordinary text, and
// the whole existing corpus, passes.
func TestWalletSecretsRejected(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	caught, secrets := 0, walletSecrets(t)
	for name, m := range secrets {
		if err := c.Check("$.body", m); err == nil {
			t.Errorf("MISSED %s: %q", name, m)
		} else {
			caught++
			t.Logf("rejected %-26s %v", name, c.Rules(m))
		}
	}
	fps := 0
	ordinary := append(append(walletLookalikes(t), labTalk...), ordinaryMessages...)
	for _, m := range ordinary {
		if rules := c.Rules(m); len(rules) > 0 {
			fps++
			t.Errorf("FALSE POSITIVE (rules %v): %q", rules, m)
		}
	}
	t.Logf("summary: recall %d/%d, false positives %d/%d", caught, len(secrets), fps, len(ordinary))
}

// TestIssueSecretKindsRefused: the five texts of the attack as posted to a
// lab room (0x key, ETH_PRIVATE_KEY=, WIF, a 12-word seed phrase, a bearer
// header of 40 hex digits) are each refused.
func TestIssueSecretKindsRefused(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	s := walletSecrets(t)
	for _, k := range []string{"0x wallet key", "ETH_PRIVATE_KEY=", "WIF compressed", "BIP-39 12 words", "Bearer 40 hex"} {
		if c.Check("$.body", s[k]) == nil {
			t.Errorf("%s accepted", k)
		}
	}
}

// BenchmarkSeedPhraseScan64KiB: the worst case for the BIP-39 scan, 64 KiB
// of word-list words (every word ends five checksum windows).
func BenchmarkSeedPhraseScan64KiB(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	var sb strings.Builder
	for sb.Len() < 64<<10 {
		sb.WriteString(bip39.WordList[r.IntN(2048)] + " ")
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	for i := 0; i < b.N; i++ {
		walletSecret(text)
	}
}
