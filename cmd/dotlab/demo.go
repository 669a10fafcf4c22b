package main

import (
	"os"
	"time"

	"github.com/dotlab/dotlab/demo"
	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	var o demo.Options
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run DotLab on real published claims end to end (the main job)",
		Long:  help("demo"),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			o.Binary, o.Version, o.Out = self, version, cmd.OutOrStdout()
			_, err = demo.Run(cmd.Context(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.VarDir, "var", "var", "directory for everything the demo writes")
	f.StringVar(&o.ImagesVar, "images-var", "", "directory the example images are built and stored in (default: --var)")
	f.StringVar(&o.ExamplesDir, "examples", "examples", "the repository's examples directory")
	f.StringVar(&o.Addr, "addr", "127.0.0.1:8080", "server address")
	f.StringVar(&o.ArchiveAddr, "archive-addr", "127.0.0.1:8090", "address serving the examples' data and git repositories")
	f.BoolVar(&o.Exit, "exit", false, "exit after the table instead of leaving the server running")
	f.DurationVar(&o.ChallengeWindow, "challenge-window", 45*time.Second, "challenge window of the demo server")
	return cmd
}
