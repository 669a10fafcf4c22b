package cli

import (
	"fmt"
	"time"

	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/runner"
	"github.com/spf13/cobra"
)

// CanaryCmd is `dotlab canary` (docs/protocol.md "Canary"): with the
// agent's registered identity, fetch every settled claim's pinned input
// URLs (GET, the bytes hashed up to --max-hash) under the runner's fetch
// policy and report serving, dead or different to the server; with
// --every, again after each interval until interrupted.
func CanaryCmd(defaultServer, serverUsage string) *cobra.Command {
	var (
		server, cacheDir string
		claim            string
		every, timeout   time.Duration
		maxHash          int64
		allowPrivate     bool
	)
	cmd := &cobra.Command{
		Use:   "canary",
		Short: "Check that settled claims' input URLs still serve the pinned bytes; report to the server",
		Long: `Fetch each settled claim's pinned dataset, helper, download and code archive URLs from this
machine (the server never fetches a stranger's URL) and report each as serving (the bytes hash to the
pin), dead (cannot be fetched: refused, DNS, 4xx, 5xx) or different (other bytes) with
POST /api/v1/claims/{id}/canary. The claim page shows the latest report per URL. A file over
--max-hash bytes is reported serving on a 2xx answer without being hashed. --claim checks one claim
(any state); --every repeats the pass on a schedule. One report per claim per agent per minute.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, _, err := agent.Open(cmd.Context(), server, agent.Config{CacheDir: cacheDir, AllowPrivate: allowPrivate}, cmd.ErrOrStderr())
			if err != nil {
				return APIErr(err)
			}
			a.Logf = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			c := &agent.Canary{Agent: a, HTTP: runner.Policy{AllowPrivate: allowPrivate}.Client(), MaxHash: maxHash, Timeout: timeout}
			for {
				if claim != "" {
					_, err = c.Claim(cmd.Context(), claim)
				} else {
					var n int
					n, err = c.Once(cmd.Context())
					fmt.Fprintf(cmd.OutOrStdout(), "canary: reported on %d settled claims\n", n)
				}
				if err != nil || every <= 0 {
					return APIErr(err)
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(every):
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", defaultServer, serverUsage)
	f.StringVar(&cacheDir, "cache", DefaultCacheDir(), "cache directory")
	f.StringVar(&claim, "claim", "", "check this claim only (DL-0001), in any state")
	f.DurationVar(&every, "every", 0, "repeat the pass after this interval (e.g. 24h); 0: one pass")
	f.DurationVar(&timeout, "timeout", time.Minute, "bound on each URL's fetch")
	f.Int64Var(&maxHash, "max-hash", agent.DefaultCanaryMaxHash, "hash at most this many bytes per URL; a larger file is reported serving on a 2xx answer, unhashed")
	f.BoolVar(&allowPrivate, "allow-private-urls", false, "admit plain http, loopback and private addresses (local tests and the demo only)")
	return cmd
}

// ArchiveFlags registers `dotlab serve`'s input archive flags into dir and
// the limits (docs/deploy.md "Input archive").
func ArchiveFlags(cmd *cobra.Command, dir *string, maxBlob, perClaim *int64) {
	f := cmd.Flags()
	f.StringVar(dir, "archive-dir", "", "keep the input archive here: the verified datasets, helpers, downloads and code archives agents upload, by SHA-256, served to agents with a role on the claim (default: no archive)")
	f.Int64Var(maxBlob, "archive-max-blob", *maxBlob, "bytes one archived input may have")
	f.Int64Var(perClaim, "archive-per-claim", *perClaim, "bytes the archive keeps for one claim's inputs, all together")
}
