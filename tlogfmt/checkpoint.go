package tlogfmt

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// HashSize is the size of an RFC 6962 SHA-256 tree hash.
const HashSize = 32

// Checkpoint is the note text of a c2sp.org/tlog-checkpoint: the log's
// origin, its tree size and the RFC 6962 root hash at that size. DotLab
// writes no extension lines.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   [HashSize]byte
}

// Text is the checkpoint's note text: "origin\nsize\nbase64(root)\n".
func (c Checkpoint) Text() string {
	return c.Origin + "\n" + strconv.FormatInt(c.Size, 10) + "\n" + base64.StdEncoding.EncodeToString(c.Root[:]) + "\n"
}

// ParseCheckpoint parses a checkpoint's note text (the text of a verified
// note, without its signatures). Extension lines are allowed and ignored.
// It fails naming the line that is malformed.
func ParseCheckpoint(text string) (Checkpoint, error) {
	var c Checkpoint
	if !strings.HasSuffix(text, "\n") {
		return c, fmt.Errorf("checkpoint: the note text must end in a newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return c, fmt.Errorf("checkpoint: %d lines; want origin, tree size and root hash", len(lines))
	}
	if lines[0] == "" {
		return c, fmt.Errorf("checkpoint: empty origin line")
	}
	c.Origin = lines[0]
	n, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != lines[1] {
		return c, fmt.Errorf("checkpoint: tree size %q is not a decimal number without leading zeros", lines[1])
	}
	c.Size = n
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != HashSize {
		return c, fmt.Errorf("checkpoint: root hash %q is not the base64 of %d bytes", lines[2], HashSize)
	}
	copy(c.Root[:], root)
	for i, l := range lines[3:] {
		if l == "" {
			return c, fmt.Errorf("checkpoint: extension line %d is empty", i+1)
		}
	}
	return c, nil
}
