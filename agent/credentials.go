package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/internal/safefs"
)

// Credentials are what `dotlab agent register` keeps per server: one entry
// per server base URL in a JSON object, in the file CredentialsPath names
// (mode 0600; its directory 0700). The key is never printed.
type Credentials struct {
	AgentID string `json:"agent_id"`
	Name    string `json:"name"`
	APIKey  string `json:"api_key"`
	// SigningKey is the file of the agent's private signing key (PKCS #8
	// PEM, mode 0600; attest.LoadKey), empty for an agent registered
	// without one.
	SigningKey string `json:"signing_key,omitempty"`
}

// ConfigDir is $DOTLAB_CONFIG_DIR when set, else <the user's config
// dir>/dotlab: where the credentials and the logs' last checkpoints live.
func ConfigDir() (string, error) {
	if dir := os.Getenv("DOTLAB_CONFIG_DIR"); dir != "" {
		return dir, nil
	}
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config dir: set DOTLAB_CONFIG_DIR (%w)", err)
	}
	return filepath.Join(base, "dotlab"), nil
}

// CredentialsPath is <config dir>/agents.json (ConfigDir).
func CredentialsPath() (string, error) {
	dir, err := ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "agents.json"), nil
}

// LogsPath is <config dir>/logs.json (ConfigDir): each server's log key and
// the last checkpoint this machine verified (verify.Witness).
func LogsPath() (string, error) {
	dir, err := ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "logs.json"), nil
}

// LoadCredentials reads the credentials file at path, keyed by server; a
// missing file is an empty set.
func LoadCredentials(path string) (map[string]Credentials, error) {
	all := map[string]Credentials{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return all, nil
	} else if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return all, nil
}

// SaveCredentials stores c for server in the file at path, keeping the
// other servers' entries. It writes atomically (a temporary file renamed
// over the old one) with mode 0600, creating the directory with mode 0700.
func SaveCredentials(path, server string, c Credentials) error {
	all, err := LoadCredentials(path)
	if err != nil {
		return err
	}
	all[server] = c
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	return safefs.WritePrivate(path, data, true)
}

// Connect returns a client for server authenticated as the agent registered
// there: $DOTLAB_API_KEY when set, else the key stored in CredentialsPath.
func Connect(server string) (*client.Client, error) {
	c, err := client.New(server, "")
	if err != nil {
		return nil, err
	}
	key, err := Key(c.Server())
	if err != nil {
		return nil, err
	}
	return c.WithKey(key), nil
}

// Key returns the API key to use on server (a base URL as client.Server
// gives it): $DOTLAB_API_KEY when set, else the key stored for server in
// CredentialsPath. The error names the register command, never a key.
func Key(server string) (string, error) {
	if key := os.Getenv("DOTLAB_API_KEY"); key != "" {
		return key, nil
	}
	all, _, err := stored()
	if err != nil {
		return "", err
	}
	cr, ok := all[server]
	if !ok {
		return "", fmt.Errorf("no agent registered for %s: run `dotlab agent register --server %s --name N --operator O` first (or set DOTLAB_API_KEY)", server, server)
	}
	return cr.APIKey, nil
}

// ServerEnv is the environment variable naming the server's base URL for
// the commands that take it from the environment (`dotlab mcp`).
const ServerEnv = "DOTLAB_SERVER"

// LocalServer is the server the commands talk to when nothing names one.
const LocalServer = "http://127.0.0.1:8080"

// DefaultServer is the server of a command given no --server:
// $DOTLAB_SERVER, else the one server this machine has registered an agent
// with (ResolveServer), else LocalServer.
func DefaultServer() string {
	if s, err := ResolveServer(""); err == nil {
		return s
	}
	return LocalServer
}

// ResolveServer is the server base URL to work against: flag when not
// empty, else $DOTLAB_SERVER, else the one server this machine has
// registered an agent with (CredentialsPath, written by `dotlab agent
// register`). With no server registered, or several and neither flag nor
// environment naming one, the error says how to choose.
func ResolveServer(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv(ServerEnv); env != "" {
		return env, nil
	}
	all, _, err := stored()
	if err != nil {
		return "", err
	}
	servers := make([]string, 0, len(all))
	for s := range all {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	switch len(servers) {
	case 1:
		return servers[0], nil
	case 0:
		return "", fmt.Errorf("no server: give --server URL or set %s, or register first with `dotlab agent register --server URL --name N --operator O`", ServerEnv)
	}
	return "", fmt.Errorf("agents are registered with %d servers (%s): choose one with --server URL or %s", len(servers), strings.Join(servers, ", "), ServerEnv)
}

// SplitCapabilities splits a comma-separated capability list ("python, r")
// into its names, dropping empty ones.
func SplitCapabilities(s string) []string {
	var out []string
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// stored reads the credentials file (CredentialsPath) and returns its
// entries and where it is.
func stored() (map[string]Credentials, string, error) {
	path, err := CredentialsPath()
	if err != nil {
		return nil, "", err
	}
	all, err := LoadCredentials(path)
	return all, path, err
}
