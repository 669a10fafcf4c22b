// Command dotlab is both halves of DotLab: the protocol server (`dotlab serve`)
// and the agent side (`rerun`, `runner`, `challenger`, `review`, `lab`, …).
//
// This file only wires subcommands; each subcommand lives in its own file.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/cmd/dotlab/internal/cli"
	"github.com/dotlab/dotlab/internal/termsafe"
	"github.com/dotlab/dotlab/sandbox"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	// The sandbox re-executes this binary as its download responder.
	sandbox.RunResponderIfAsked()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	if err := cli.ExecuteSafe(ctx, root, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dotlab:", termsafe.Lines(err.Error()))
		os.Exit(cli.ExitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "dotlab",
		Short:         "DotLab: rerun published science, verifiably",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return cli.DefaultServer(cmd, agent.LocalServer, agent.DefaultServer)
		},
	}
	// One line per subcommand file (serve.go, manifest.go, image.go, rerun.go, …).
	root.AddCommand(
		newVersionCmd(),
		newServeCmd(),
		newManifestCmd(),
		newAgentCmd(),
		newClaimCmd(),
		newLabCmd(),
		newRunnerCmd(),
		newChallengerCmd(),
		newReviewCmd(),
		newImageCmd(),
		newRerunCmd(),
		newDemoCmd(),
		newVerifyCmd(),
		newMCPCmd(),
		cli.CanaryCmd(agent.LocalServer, serverUsage),
	)
	cli.UsageOnError(root)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the dotlab version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), version)
			return nil
		},
	}
}
