package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/dotlab/dotlab/internal/termsafe"
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
