package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dotlab/dotlab"

	"github.com/dotlab/dotlab/attest"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
	"github.com/dotlab/dotlab/verify"
)

// Config is how New sets up an agent's rerun engine and work directory.
type Config struct {
	CacheDir string // images and downloads of the rerun engine (runner.New)
	WorkDir  string // one directory per rerun; default <CacheDir>/agent-runs
	Runtime  string // OCI runtime, runc or runsc (sandbox.Runtime)
	// AllowPrivate admits plain http, git://, loopback and private addresses
	// in manifests (local tests and the demo). Without it the engine fetches
	// with the strict policy: https, public addresses only, checked after
	// DNS and on every redirect (docs/threat-model.md).
	AllowPrivate bool
	Capabilities []string                         // see Agent.Capabilities
	Logf         func(format string, args ...any) // may be nil
	Clock        dotlab.Clock                     // default dotlab.SystemClock
	// KeepCheckpoints makes the agent check the server's transparency log
	// after each step and keep its last checkpoint in LogsPath, as `dotlab
	// verify` does (docs/verification.md §5); the commands set it.
	KeepCheckpoints bool
	// Cosigning is the witness policy of that check (verify.Cosigning:
	// `--witness-key`, `--witnesses`).
	Cosigning verify.Cosigning
	// Key signs the agent's records (Agent.Key); with SignWithStoredKey and
	// no Key, the key stored for the server (StoredKey) is used, when any.
	Key               *attest.Key
	SignWithStoredKey bool
}

// New returns an agent working through c with a runner.Runner as its
// engine.
func New(c *client.Client, cfg Config) (*Agent, error) {
	if cfg.Clock == nil {
		cfg.Clock = dotlab.SystemClock{}
	}
	eng, err := runner.New(cfg.CacheDir, sandbox.Runtime{Name: cfg.Runtime}, runner.Policy{AllowPrivate: cfg.AllowPrivate, TrustCAFile: os.Getenv(runner.TrustCAEnv)}, cfg.Clock)
	if err != nil {
		return nil, err
	}
	work := cfg.WorkDir
	if work == "" {
		work = filepath.Join(cfg.CacheDir, "agent-runs")
	}
	a := &Agent{Client: c, Engine: eng, Capabilities: cfg.Capabilities, WorkDir: work, Clock: cfg.Clock, Logf: cfg.Logf, Key: cfg.Key}
	if a.Key == nil && cfg.SignWithStoredKey {
		k, ok, err := StoredKey(c.Server())
		if err != nil {
			return nil, err
		}
		if ok {
			a.Key = k
		}
	}
	if _, _, err := cfg.Cosigning.Parse(); cfg.Cosigning.Enabled() && err != nil {
		return nil, err
	}
	if cfg.KeepCheckpoints {
		path, err := LogsPath()
		if err != nil {
			return nil, err
		}
		a.Witness = &verify.Witness{Path: path, Cosigning: cfg.Cosigning}
	}
	return a, nil
}

// Open connects to server as the agent registered there (Connect), checks
// the key (GET /agents/me) and returns the agent with its rerun engine (New
// with cfg), whose capabilities are what this machine provides of the
// registered ones (LocalCapabilities), logging to logw as "15:04:05 NAME:
// message". It signs with the key stored for the server
// (SignWithStoredKey). It also returns the agent's profile. The commands
// runner, challenger, review and mcp open their agent with it; a refused
// key is the server's error (*dotlab.Error, unauthorized).
func Open(ctx context.Context, server string, cfg Config, logw io.Writer) (*Agent, *dotlab.AgentProfile, error) {
	c, err := Connect(server)
	if err != nil {
		return nil, nil, err
	}
	me, err := c.Me(ctx)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = dotlab.SystemClock{}
	}
	clock := cfg.Clock
	cfg.Capabilities = LocalCapabilities(me.Capabilities)
	cfg.SignWithStoredKey = true
	cfg.Logf = func(format string, args ...any) {
		fmt.Fprintf(logw, "%s %s: %s\n", clock.Now().Local().Format(time.TimeOnly), me.Name, fmt.Sprintf(format, args...))
	}
	a, err := New(c, cfg)
	if err == nil && a.Key != nil && a.Key.Public().ID != me.KeyID {
		// The server's record of this agent's key is not the key this
		// machine holds: records signed here would not verify, and records
		// "signed" with the key the server shows are not this agent's.
		return nil, nil, fmt.Errorf("the server shows signing key %q for agent %s, but this machine holds %s: refusing to work as this agent; ask the server's operator why its key changed (keys cannot be changed through the API)", me.KeyID, me.ID, a.Key.Public().ID)
	}
	return a, me, err
}
