// Package docs holds DotLab's documentation as Markdown files and embeds
// them, so the server can publish them at /docs/{name} (web package) from
// the same text that is read on GitHub.
package docs

import "embed"

// FS holds every *.md file of this directory.
//
//go:embed *.md
var FS embed.FS
