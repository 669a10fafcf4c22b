package leakcheck

import (
	"bytes"
	"crypto/sha256"
	"math/big"
	"regexp"
	"strings"

	bip39 "github.com/cosmos/go-bip39"
)

// walletRules are the gitleaks rules for keys the skill text names first
// (../shared/seeds/agent-skill-dotlab.txt "Core rules": never post a wallet
// key, a seed phrase or a token) that gitleaks' defaults miss:
//   - an Ethereum-style private key, 0x followed by 64 hex digits;
//   - 64 hex digits labelled as a key (private_key=, priv key, wallet key,
//     secret key, ETH_PRIVATE_KEY=, signing key); the whole match, label
//     included, is the secret, so the allowlist for bare SHA-256 digests
//     (leakcheck.go) does not apply, while "token = <sha256>" or
//     "key: <sha256>" still passes;
//   - a bearer, token or basic credential in an Authorization header.
//
// Keys whose shape alone is ambiguous (WIF, BIP-32 extended keys, BIP-39
// seed phrases) are found by their checksums in Go (walletSecret below).
const walletRules = `

[[rules]]
id = "wallet-private-key-0x"
description = "Ethereum-style private key: 0x and 64 hex digits"
regex = '''(?:^|[^0-9A-Za-z])0[xX][0-9a-fA-F]{64}(?:[^0-9A-Za-z]|$)'''
keywords = ["0x"]

[[rules]]
id = "wallet-private-key-labelled"
description = "64 hex digits labelled as a private or wallet key"
regex = '''(?i)(?:private|priv|wallet|secret|signing)[ _.-]?key["']?[ \t]*(?:[:=]|is|=>)?[ \t]*["']?(?:0x)?[0-9a-f]{64}\b'''
keywords = ["key"]

[[rules]]
id = "authorization-header-credential"
description = "Bearer, token or basic credential in an Authorization header"
regex = '''(?i)authorization["']?[ \t]*[:=][ \t]*["']?(?:bearer|token|basic)[ \t]+[A-Za-z0-9._~+/=-]{16,}'''
keywords = ["authorization"]

`

const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

var (
	// base58Run is a maximal run of Base58 characters (Bitcoin's
	// alphabet); walletSecret decodes only runs of the lengths a WIF key
	// (51 or 52 characters) or an extended key (111 or 112) has.
	base58Run = regexp.MustCompile(`[1-9A-HJ-NP-Za-km-z]+`)
	// letterRun is a word for the BIP-39 scan.
	letterRun = regexp.MustCompile(`[A-Za-z]+`)
	// extPrivateVersions are the 4-byte version prefixes of BIP-32
	// extended private keys: xprv, tprv (BIP-32), yprv, uprv (BIP-49),
	// zprv, vprv (BIP-84), Yprv, Uprv, Zprv, Vprv (SLIP-132 multisig).
	extPrivateVersions = [][]byte{
		{0x04, 0x88, 0xad, 0xe4}, {0x04, 0x35, 0x83, 0x94},
		{0x04, 0x9d, 0x78, 0x78}, {0x04, 0x4a, 0x4e, 0x28},
		{0x04, 0xb2, 0x43, 0x0c}, {0x04, 0x5f, 0x18, 0xbc},
		{0x02, 0x95, 0xb0, 0x05}, {0x02, 0x42, 0x85, 0xb5},
		{0x02, 0xaa, 0x7a, 0x99}, {0x02, 0x57, 0x50, 0x48},
	}
)

// base58Decode decodes s (Bitcoin's Base58 alphabet, leading '1's as zero
// bytes); false if s holds another character. Callers bound len(s).
func base58Decode(s string) ([]byte, bool) {
	n := new(big.Int)
	radix := big.NewInt(58)
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	for i := 0; i < len(s); i++ {
		d := strings.IndexByte(base58Alphabet, s[i])
		if d < 0 {
			return nil, false
		}
		n.Mul(n, radix)
		n.Add(n, big.NewInt(int64(d)))
	}
	return append(make([]byte, zeros), n.Bytes()...), true
}

// base58CheckPayload returns the payload of a Base58Check string (its
// last 4 bytes are the first 4 of the double SHA-256 of the rest), or
// false when the checksum does not hold.
func base58CheckPayload(s string) ([]byte, bool) {
	b, ok := base58Decode(s)
	if !ok || len(b) < 5 {
		return nil, false
	}
	p, sum := b[:len(b)-4], b[len(b)-4:]
	h1 := sha256.Sum256(p)
	h2 := sha256.Sum256(h1[:])
	return p, bytes.Equal(h2[:4], sum)
}

// base58Secret classifies one Base58 run: "wif-private-key" for a Wallet
// Import Format key (version 0x80 mainnet or 0xef testnet, 32 key bytes,
// an optional 0x01 compression flag), "bip32-extended-private-key" for a
// 78-byte serialized extended private key, "" for anything else or a bad
// checksum (an address, a hash, a random word).
func base58Secret(run string) string {
	switch len(run) {
	case 51, 52:
		p, ok := base58CheckPayload(run)
		if ok && (p[0] == 0x80 || p[0] == 0xef) && (len(p) == 33 || len(p) == 34 && p[33] == 0x01) {
			return "wif-private-key"
		}
	case 111, 112:
		p, ok := base58CheckPayload(run)
		if !ok || len(p) != 78 || p[45] != 0 {
			return ""
		}
		for _, v := range extPrivateVersions {
			if bytes.Equal(p[:4], v) {
				return "bip32-extended-private-key"
			}
		}
	}
	return ""
}

// bip39Lengths are the word counts of a BIP-39 mnemonic, longest first.
var bip39Lengths = []int{24, 21, 18, 15, 12}

// seedPhrase reports whether words holds, at some position, 12, 15, 18,
// 21 or 24 consecutive words of the BIP-39 English word list whose
// checksum holds (BIP-39 "Generating the mnemonic": the first n/3 bits of
// the SHA-256 of the entropy; the word list is github.com/cosmos/go-bip39's).
// Words are matched in lower case. Ordinary prose costs one map look-up
// per word; a run of wordlist words costs at most five checksums of at
// most 32 bytes per word.
func seedPhrase(words []string) bool {
	idx := make([]int, 0, 24)
	for _, w := range words {
		i, ok := bip39.ReverseWordMap[w]
		if !ok {
			idx = idx[:0]
			continue
		}
		if len(idx) == 24 {
			copy(idx, idx[1:])
			idx = idx[:23]
		}
		idx = append(idx, i)
		for _, n := range bip39Lengths {
			if len(idx) >= n && mnemonicChecksumHolds(idx[len(idx)-n:]) {
				return true
			}
		}
	}
	return false
}

// mnemonicChecksumHolds reports whether the word indexes (11 bits each,
// 12 to 24 of them, a multiple of 3) carry entropy of 32*n/3 bits whose
// SHA-256 starts with the n/3 checksum bits that follow it.
func mnemonicChecksumHolds(idx []int) bool {
	var buf [33]byte
	bit := 0
	for _, v := range idx {
		for k := 10; k >= 0; k-- {
			if v>>k&1 == 1 {
				buf[bit/8] |= 0x80 >> (bit % 8)
			}
			bit++
		}
	}
	cs := len(idx) / 3
	ent := (bit - cs) / 8
	sum := sha256.Sum256(buf[:ent])
	for k := 0; k < cs; k++ {
		b := ent*8 + k
		if (buf[b/8]>>(7-b%8))&1 != (sum[k/8]>>(7-k%8))&1 {
			return false
		}
	}
	return true
}

// walletSecret returns the rule id of a wallet secret in text that only a
// checksum tells from ordinary text (WIF key, extended private key,
// BIP-39 seed phrase), or "". Its cost is linear in len(text): each Base58
// run of a key's length is decoded once, and each word is looked up once
// and ends at most five checksum windows.
func walletSecret(text string) string {
	for _, loc := range base58Run.FindAllStringIndex(text, -1) {
		if id := base58Secret(text[loc[0]:loc[1]]); id != "" {
			return id
		}
	}
	ws := letterRun.FindAllString(text, -1)
	for i := range ws {
		ws[i] = strings.ToLower(ws[i])
	}
	if seedPhrase(ws) {
		return "bip39-seed-phrase"
	}
	return ""
}
