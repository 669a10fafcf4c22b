package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
)

// badge is a claim's README badge: "DotLab DL-0001" on grey beside what
// the record says now, on a colour that goes with it.
type badge struct {
	Label, Message string
	Color          string // #rrggbb, white text on it has a contrast of at least 4.5:1
}

// Badge colours: compared outcomes, outcomes that say nothing about the
// paper, work in progress, review.
const (
	colorReproduced    = "#2a7a2a"
	colorNotReproduced = "#a8470c"
	colorNotRun        = "#5f5f5f"
	colorInProgress    = "#1f5fa8"
	colorReview        = "#6f4a99"
)

// claimBadge says the claim's outcome and state in a few words: the
// settled outcome; the official run's outcome while it may be challenged
// (runOutcome, "" before a run); review; the rerun in progress; or waiting
// for one.
func claimBadge(c *dotlab.Claim, runOutcome dotlab.Outcome) badge {
	b := badge{Label: "DotLab " + c.ID}
	color := map[dotlab.Outcome]string{dotlab.OutcomeReproduced: colorReproduced, dotlab.OutcomeNotReproduced: colorNotReproduced}
	switch c.State {
	case dotlab.StateSettled:
		b.Message, b.Color = label(c.Outcome), color[c.Outcome]
		if b.Color == "" {
			b.Color = colorNotRun
		}
	case dotlab.StatePublished, dotlab.StateChallengeWindow:
		b.Message, b.Color = label(runOutcome)+", open to challenge", colorInProgress
	case dotlab.StateDisputed, dotlab.StateReviewed:
		b.Message, b.Color = "disputed, under review", colorReview
	case dotlab.StateAssigned, dotlab.StateRunning:
		b.Message, b.Color = "rerun in progress", colorInProgress
	default:
		b.Message, b.Color = "awaiting a rerun", colorNotRun
	}
	return b
}

func label(s any) string { return strings.ReplaceAll(fmt.Sprint(s), "_", " ") }

// textWidth estimates the width in px of s in 11 px Verdana, the badge
// font: generous enough that the text never overflows its box (each text
// element is also given its textLength, so renderers fit it exactly).
func textWidth(s string) float64 {
	w := 0.0
	for _, r := range s {
		switch {
		case strings.ContainsRune("il.,:;!|'", r):
			w += 3.5
		case strings.ContainsRune("ftrjI()[]- ", r):
			w += 4.8
		case strings.ContainsRune("mwMW", r):
			w += 10.5
		case r >= 'A' && r <= 'Z', r > 0x7f:
			w += 7.6
		default:
			w += 7
		}
	}
	return w
}

// svg renders the badge in the flat style of README badges: two rounded
// boxes, 20 px high, white text with a faint shadow. Text is escaped as XML
// character data; the colours are constants.
func (b badge) svg() []byte {
	lw, mw := textWidth(b.Label)+10, textWidth(b.Message)+10
	w := lw + mw
	alt := b.Label + ": " + b.Message
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="20" role="img" aria-label="%s">`, w, esc(alt))
	fmt.Fprintf(&buf, `<title>%s</title>`, esc(alt))
	buf.WriteString(`<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>`)
	fmt.Fprintf(&buf, `<clipPath id="r"><rect width="%.0f" height="20" rx="3" fill="#fff"/></clipPath>`, w)
	fmt.Fprintf(&buf, `<g clip-path="url(#r)"><rect width="%.0f" height="20" fill="#555"/><rect x="%.0f" width="%.0f" height="20" fill="%s"/><rect width="%.0f" height="20" fill="url(#s)"/></g>`,
		lw, lw, mw, b.Color, w)
	buf.WriteString(`<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">`)
	for _, t := range []struct {
		x, width float64
		s        string
	}{{lw / 2, lw - 10, b.Label}, {lw + mw/2, mw - 10, b.Message}} {
		fmt.Fprintf(&buf, `<text aria-hidden="true" x="%.1f" y="15" fill="#010101" fill-opacity=".3" textLength="%.0f">%s</text>`, t.x, t.width, esc(t.s))
		fmt.Fprintf(&buf, `<text x="%.1f" y="14" textLength="%.0f">%s</text>`, t.x, t.width, esc(t.s))
	}
	buf.WriteString(`</g></svg>`)
	return buf.Bytes()
}

// esc escapes s as XML text or a double-quoted attribute value.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// badge serves GET /claims/{id}/badge.svg: the claim's badge, cacheable
// (ETag of its bytes, so it changes when the claim moves on; a settled
// claim's badge is final and cached for a day, others for 5 min).
func (h *Handler) badge(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c, err := h.store.FindClaim(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	var runOutcome dotlab.Outcome
	if c.RunID != "" && c.State != dotlab.StateSettled {
		run, err := h.store.FindRun(ctx, c.RunID)
		if err != nil {
			return err
		}
		runOutcome = run.Outcome
	}
	maxAge := 5 * time.Minute
	if c.State == dotlab.StateSettled {
		maxAge = 24 * time.Hour
	}
	serveBytes(w, r, "image/svg+xml", maxAge, claimBadge(c, runOutcome).svg())
	return nil
}

// serveBytes answers with b as contentType, an ETag of its SHA-256 and
// Cache-Control public for maxAge; http.ServeContent answers If-None-Match
// (304), HEAD and ranges.
func serveBytes(w http.ResponseWriter, r *http.Request, contentType string, maxAge time.Duration, b []byte) {
	sum := sha256.Sum256(b)
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
	hd.Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(maxAge.Seconds())))
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}
