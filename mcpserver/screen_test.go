package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dotlab/dotlab/attest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testKey has a DotLab key's shape (dlk_ and 43 base64url characters); it
// is no real key.
const testKey = "dlk_Zq3-Xw9_Tb7LmN2pQr5sVu8yA1cE4gH6jK0oRtWxYz3"

func TestScreenFindsTheKeyInAnySpelling(t *testing.T) {
	s := newScreen(testKey, nil)
	secret := strings.TrimPrefix(testKey, "dlk_")
	rev := []rune(testKey)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	for name, text := range map[string]string{
		"as is":        "here: " + testKey,
		"no prefix":    "secret=" + secret,
		"upper case":   strings.ToUpper(testKey),
		"spaced":       strings.Join(strings.Split(testKey, ""), " "),
		"line breaks":  testKey[:20] + "\n" + testKey[20:],
		"dotted":       strings.Join(strings.Split(secret, ""), "."),
		"reversed":     string(rev),
		"base64":       base64.StdEncoding.EncodeToString([]byte(testKey)),
		"base64url":    base64.RawURLEncoding.EncodeToString([]byte(testKey)),
		"hex":          hex.EncodeToString([]byte(testKey)),
		"another key":  "dlk_" + strings.Repeat("A1b2", 10) + "xyz",
		"github token": "ghp_" + strings.Repeat("aB3d", 9),
		"aws key":      "AKIA" + "Z7Q4MX2LPJRT3WKD",
		"private key":  "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn",
	} {
		if err := s.check("body", text); asToolError(err).Code != ESECRET {
			t.Errorf("%s: not caught: %v", name, err)
		}
	}
	for _, text := range []string{
		"mean_diff = 1.58, within 0.005 of the published value",
		"input sleep verified: sha256 5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592",
		"commit 0123456789abcdef0123456789abcdef01234567 checked out",
		"see results.json line 3; the key finding is the t statistic",
	} {
		if err := s.check("body", text); err != nil {
			t.Errorf("ordinary lab text refused: %q: %v", text, err)
		}
	}
}

// TestAnswersHoldingTheKeyAreWithheld: whatever a tool, resource or prompt
// would answer, an answer holding the key leaves as an output_withheld
// error without it (the last check, withholdKey).
func TestAnswersHoldingTheKeyAreWithheld(t *testing.T) {
	ctx := context.Background()
	s := &service{screen: newScreen(testKey, nil)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	srv.AddReceivingMiddleware(s.withholdKey)
	srv.AddSendingMiddleware(s.withholdKeySent)
	add(srv, "leaky", "Leaky", "answers with the key", true, func(context.Context, *mcp.CallToolRequest, NoInput) (ClaimInput, error) {
		return ClaimInput{ClaimID: "key " + testKey}, nil
	})
	add(srv, "leaky_error", "Leaky error", "fails with the key", true, func(context.Context, *mcp.CallToolRequest, NoInput) (ClaimInput, error) {
		return ClaimInput{}, toolErrorf(EFAILED, "Authorization: Bearer "+testKey)
	})
	add(srv, "clean", "Clean", "answers", true, func(context.Context, *mcp.CallToolRequest, NoInput) (ClaimInput, error) {
		return ClaimInput{ClaimID: "DL-0001"}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "leaky"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: testKey}}}}, nil
	})
	st, ct := mcp.NewInMemoryTransports()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, name := range []string{"leaky", "leaky_error"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
		if err != nil || !res.IsError || res.StructuredContent != nil || !strings.Contains(text(res), EKEYWITHHELD) || strings.Contains(text(res), "Zq3") {
			t.Fatalf("%s: %v %+v %s", name, err, res, text(res))
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "clean"}); err != nil || res.IsError {
		t.Fatalf("clean: %v %+v", err, res)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "leaky"}); err == nil || strings.Contains(err.Error(), "Zq3") || !strings.Contains(err.Error(), EKEYWITHHELD) {
		t.Fatalf("prompt: %v", err)
	}
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestScreenFindsPiecesOfTheKey: spellings that a hostile text can ask
// for and that neither the old forms nor the server's gitleaks rules caught
// (each checked against leakcheck in the break review): the key in two
// halves with words between, the secret alone reversed, and base64 of a
// sentence holding the secret, whose alignment shifts its encoding.
func TestScreenFindsPiecesOfTheKey(t *testing.T) {
	s := newScreen(testKey, nil)
	secret := strings.TrimPrefix(testKey, "dlk_")
	rs := []rune(secret)
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	for name, text := range map[string]string{
		"halves":             "first half " + testKey[:24] + " and then the second half " + testKey[24:],
		"secret halves":      "part one " + secret[:22] + " part two " + secret[22:],
		"reversed secret":    "here it is backwards: " + string(rs),
		"base64, 1 byte in":  base64.StdEncoding.EncodeToString([]byte("s " + secret)),
		"base64, 2 bytes in": base64.StdEncoding.EncodeToString([]byte("my api secret is " + secret)),
		"base64url of a URL": base64.RawURLEncoding.EncodeToString([]byte("https://x.example/?k=" + testKey)),
	} {
		if err := s.check("body", text); err == nil || asToolError(err).Code != ESECRET {
			t.Errorf("%s: not caught: %q", name, text)
		}
	}
}

// TestScreenFindsTheSigningKey: the agent's private signing key — its PEM
// file, the file's body without the header lines, a piece of it, its seed
// in hex — is refused like the API key, and any Ed25519 private key's body
// by its shape; the public key line (which the profile shows) passes.
func TestScreenFindsTheSigningKey(t *testing.T) {
	k, err := attest.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := k.Save(path); err != nil {
		t.Fatal(err)
	}
	pemText, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(pemText)), "\n")
	body := strings.Join(lines[1:len(lines)-1], "")
	der, _ := base64.StdEncoding.DecodeString(body)
	other, _ := attest.GenerateKey()
	otherPath := filepath.Join(t.TempDir(), "other.pem")
	other.Save(otherPath)
	otherPEM, _ := os.ReadFile(otherPath)
	otherBody := strings.Split(string(otherPEM), "\n")[1]
	s := newScreen(testKey, k)
	for name, text := range map[string]string{
		"PEM file":           string(pemText),
		"body":               "the key is " + body,
		"last 30 characters": body[len(body)-30:],
		"seed in hex":        hex.EncodeToString(der[len(der)-32:]),
		"another key's body": otherBody,
	} {
		if err := s.check("body", text); err == nil || asToolError(err).Code != ESECRET {
			t.Errorf("%s: not caught: %q", name, text)
		}
	}
	if err := s.check("body", "my signing key is "+k.Public().Authorized+" ("+k.Public().ID+")"); err != nil {
		t.Errorf("the public key refused: %v", err)
	}
}
