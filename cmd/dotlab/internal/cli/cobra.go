package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/termsafe"
	"github.com/dotlab/dotlab/server"
	"github.com/dotlab/dotlab/verify"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// UsageOnError makes a wrong argument count or an unknown flag on cmd or any
// of its subcommands say the command's usage line and where its help is
// ("usage: dotlab rerun MANIFEST [flags] (see dotlab rerun --help)").
func UsageOnError(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return withUsage(c, err) })
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return withUsage(c, err)
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		UsageOnError(sub)
	}
}

func withUsage(c *cobra.Command, err error) error {
	return fmt.Errorf("%w\nusage: %s (see %s --help)", err, c.UseLine(), c.CommandPath())
}

// DefaultServer sets a command's --server, when not given and still at
// local (the flags' static default), to resolve(): the hook of the root
// command's PersistentPreRunE ($DOTLAB_SERVER, else the one registered
// server; agent.DefaultServer).
func DefaultServer(cmd *cobra.Command, local string, resolve func() string) error {
	if f := cmd.Flags().Lookup("server"); f != nil && !f.Changed && f.DefValue == local {
		return f.Value.Set(resolve())
	}
	return nil
}

// ExecuteSafe runs root with its standard output going to stdout through a
// termsafe.Writer: commands print others' text (messages, rationales,
// notes, names), so everything they print is shown with controls and
// bidirectional characters escaped (internal/termsafe).
func ExecuteSafe(ctx context.Context, root *cobra.Command, stdout io.Writer) error {
	out := &termsafe.Writer{W: stdout}
	root.SetOut(out)
	err := root.ExecuteContext(ctx)
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	return err
}

// WitnessFlags registers --witness-key and --witnesses (dotlab verify and
// the agent commands: docs/verification.md "Witnesses") into p.
func WitnessFlags(f *pflag.FlagSet, p *verify.Cosigning) {
	f.StringArrayVar(&p.Keys, "witness-key", nil, "a witness's cosignature/v1 verifier key (name+id+key; repeatable): require the log's checkpoints to carry cosignatures by these witnesses, never by keys the server names")
	f.IntVar(&p.Need, "witnesses", 0, "how many of the --witness-key witnesses must have cosigned the entries checked (default: all of them)")
}

// WindowFlags registers `dotlab serve`'s protocol windows, review quorum
// and sealed-vote flags on f, into w (docs/mechanism.md §2, §4a).
func WindowFlags(f *pflag.FlagSet, w *dotlab.Windows) {
	f.DurationVar(&w.Accept, "accept-window", w.Accept, "how long a job offer stays open")
	f.DurationVar(&w.Publish, "publish-window", w.Publish, "how long an accepted job has to publish its run")
	f.DurationVar(&w.Challenge, "challenge-window", w.Challenge, "how long a published run can be challenged")
	f.IntVar(&w.Quorum, "review-quorum", w.Quorum, "votes that decide a dispute (odd)")
	f.BoolVar(&w.Sealed, "sealed-votes", false, "seal dispute votes until decided: a committee of --review-quorum reviewers per round commits, then reveals (docs/mechanism.md §4a); off, the votes so far are shown")
	f.DurationVar(&w.Commit, "commit-window", w.Commit, "sealed votes: how long a round's committee has to commit, from its first seat")
	f.DurationVar(&w.Reveal, "reveal-window", w.Reveal, "sealed votes: how long committed reviewers have to reveal, from the commit phase's end")
}

// ConnFlags registers `dotlab serve`'s per-address connection limits on f,
// into c (docs/threat-model.md "Idle connections").
func ConnFlags(f *pflag.FlagSet, c *server.ConnLimits) {
	f.IntVar(&c.PerAddr, "conn-per-addr", c.PerAddr, "TCP connections one client address may hold open (0 disables; trusted proxies are not counted)")
	f.IntVar(&c.IdlePerAddr, "conn-idle-per-addr", c.IdlePerAddr, "of them idle at once: no request yet, or between keep-alive requests (0 disables)")
	f.DurationVar(&c.HeaderTimeout, "header-timeout", c.HeaderTimeout, "close a connection that has not sent a request header within this long")
	f.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "close a keep-alive connection idle this long")
}

// ReviewFlags checks `dotlab review`'s flag combination: --rerun or
// --vote, not both; --commit needs one of them; --reveal stands alone.
func ReviewFlags(rerun, commit, reveal, vote bool) error {
	switch {
	case rerun && vote:
		return errors.New("give --rerun or --vote, not both")
	case reveal && (rerun || vote || commit):
		return errors.New("--reveal reveals the votes committed before and stops: give it alone")
	case commit && !rerun && !vote:
		return errors.New("--commit commits to a vote: give --vote runner|challenger --rationale TEXT, or --rerun")
	}
	return nil
}
