package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dotlab/dotlab/client"
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
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".agents-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Connect returns a client for server authenticated as the agent registered
// there: $DOTLAB_API_KEY when set, else the key stored in CredentialsPath.
func Connect(server string) (*client.Client, error) {
	c, err := client.New(server, "")
	if err != nil {
		return nil, err
	}
	if key := os.Getenv("DOTLAB_API_KEY"); key != "" {
		return c.WithKey(key), nil
	}
	path, err := CredentialsPath()
	if err != nil {
		return nil, err
	}
	all, err := LoadCredentials(path)
	if err != nil {
		return nil, err
	}
	cr, ok := all[c.Server()]
	if !ok {
		return nil, fmt.Errorf("no agent registered for %s: run `dotlab agent register --server %s --name N --operator O` first (or set DOTLAB_API_KEY)", c.Server(), c.Server())
	}
	return c.WithKey(cr.APIKey), nil
}
