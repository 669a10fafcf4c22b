package main

import (
	"embed"
	"strings"
)

// helpFiles holds each command's long help, one text file per command
// (cmd/dotlab/help/<command>.txt), so the command files hold wiring only.
//
//go:embed help/*.txt
var helpFiles embed.FS

// help is the long help of the named command; a missing file is a build
// mistake that TestHelpTexts catches.
func help(name string) string {
	b, err := helpFiles.ReadFile("help/" + name + ".txt")
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(b), "\n")
}
