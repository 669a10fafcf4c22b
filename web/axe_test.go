package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// viewport is a desktop viewport at width 600 CSS pixels and more, else a
// phone's (mobile, touch).
func viewport(width int64) chromedp.Action[chromedp.Void] {
	if width < 600 {
		return chromedp.EmulateViewport(width, 900, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	return chromedp.EmulateViewport(width, 900)
}

// axeCore is axe-core's browser bundle: $DOTLAB_AXE, else the copy .ci/run
// installs from npm (pinned) into .ci/node. Outside CI a missing bundle
// skips; in CI it fails.
func axeCore(t *testing.T) string {
	t.Helper()
	path := os.Getenv("DOTLAB_AXE")
	if path == "" {
		path = filepath.Join("..", ".ci", "node", "node_modules", "axe-core", "axe.min.js")
	}
	src, err := os.ReadFile(path)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("axe-core is required in CI (.ci/run installs it into .ci/node): %v", err)
		}
		t.Skipf("axe-core not found at %s (npm install --prefix .ci/node axe-core); skipping outside CI", path)
	}
	return string(src)
}

// axeViolation is one rule axe-core found broken, with the elements
// (targets, as CSS selectors) that break it.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// axeWCAG21AA runs axe-core on the loaded page with the WCAG 2.0 and 2.1
// A and AA rules, and returns the violations as JSON.
const axeWCAG21AA = `axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}, resultTypes: ["violations"]})
	.then(r => JSON.stringify({violations: r.violations, passes: r.passes.length, version: axe.version}))`

// axePage loads path in the browser at width (CSS pixels) and returns
// axe-core's violations on it.
func axePage(t *testing.T, ctx context.Context, base, path, axe string, width int64) []axeViolation {
	t.Helper()
	if err := run(t, ctx, 30*time.Second,
		viewport(width),
		chromedp.Navigate(base+path),
		chromedp.WaitVisible(chromedp.CSS(`main`)),
	); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	value(t, ctx, chromedp.Evaluate[bool](axe+"\n;true"))
	actx, cancel := context.WithTimeout(ctx, 90*time.Second) // a long docs page takes axe a while on a loaded machine
	defer cancel()
	out, err := chromedp.Run(actx, chromedp.Evaluate[string](axeWCAG21AA, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: axe-core: %v", path, err)
	}
	var res struct {
		Violations []axeViolation `json:"violations"`
		Passes     int            `json:"passes"`
		Version    string         `json:"version"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%s: axe's answer: %v: %.300s", path, err, out)
	}
	if res.Passes == 0 {
		t.Fatalf("%s: axe-core %s checked nothing", path, res.Version)
	}
	return res.Violations
}

// TestBrowserAxe: axe-core (WCAG 2.1 AA rules) finds 0 violations on every
// kind of page, in Chromium, at a desktop and a phone width (where wide
// tables and code blocks scroll): home, the claims list and its filtered
// and paged forms, a claim of each kind (disputed and settled by review,
// reproduced, listed with a lab room), a run, a lab room, an agent, the
// docs index and every docs page, and the error pages (an unknown page, an
// unknown claim, a bad list filter).
func TestBrowserAxe(t *testing.T) {
	axe := axeCore(t)
	s := newSite(t)
	ctx := browser(t)
	paths := []string{"/", "/claims", "/claims?state=settled", "/claims?after=DL-0001", "/claims?state=bogus",
		"/claims/" + s.disputed, "/claims/" + s.reproduced, "/claims/" + s.labClaim,
		"/runs/" + s.runNotReproduced, "/runs/" + s.runReproduced, "/labs/" + s.labClaim,
		"/agents/" + s.ids["runner-ada"], "/agents/" + s.ids["reviewer-0"], "/docs", "/no/such/page", "/claims/DL-9999"}
	_, _, index := s.get("/docs", "text/html")
	for _, name := range docNames(index) {
		paths = append(paths, "/docs/"+name)
	}
	for _, width := range []int64{1280, 390} {
		for _, path := range paths {
			for _, v := range axePage(t, ctx, s.base, path, axe, width) {
				var where []string
				for _, n := range v.Nodes {
					where = append(where, fmt.Sprint(n.Target)+" "+n.HTML)
				}
				t.Errorf("%s at %dpx: axe %s (%s): %s\n\t%s", path, width, v.ID, v.Impact, v.Help, strings.Join(where, "\n\t"))
			}
		}
	}
	t.Logf("axe-core: %d pages at 2 widths", len(paths))
}

// docNames are the documents the docs index links (/docs/{name}).
func docNames(index string) []string {
	var names []string
	seen := map[string]bool{}
	for _, part := range strings.Split(index, `href="/docs/`)[1:] {
		name, _, _ := strings.Cut(part, `"`)
		name, _, _ = strings.Cut(name, "#")
		if name != "" && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names
}

// TestBrowserDocsCodeKeyboard: the manifest-spec page's code blocks, which
// scroll sideways, are reached with Tab, named as regions, and show a
// visible focus ring; the arrow keys then scroll them (issue 26, item 3).
func TestBrowserDocsCodeKeyboard(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	if err := run(t, ctx, 20*time.Second, viewport(390),
		chromedp.Navigate(s.base+"/docs/manifest-spec"), chromedp.WaitVisible(chromedp.CSS(`main`))); err != nil {
		t.Fatal(err)
	}
	scrolling := value(t, ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("article.doc pre")].filter(p => p.scrollWidth > p.clientWidth).length`))
	if scrolling == 0 {
		t.Fatal("no code block of the manifest spec scrolls at 390px: the test shows nothing")
	}
	unreachable := value(t, ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("article.doc pre")].filter(p => p.tabIndex !== 0 || p.getAttribute("role") !== "region" || !p.getAttribute("aria-label")).length`))
	if unreachable != 0 {
		t.Fatalf("%d code blocks are not focusable labelled regions", unreachable)
	}
	// Tab from the top until a scrolling code block has the focus.
	var got string
	for i := 0; i < 200 && got == ""; i++ {
		if err := run(t, ctx, 5*time.Second, chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		got = value(t, ctx, chromedp.Evaluate[string](`(e => e && e.matches("article.doc pre") && e.scrollWidth > e.clientWidth ? e.getAttribute("aria-label") : "")(document.activeElement)`))
	}
	if got == "" {
		t.Fatal("Tab never reached a scrolling code block")
	}
	ring := value(t, ctx, chromedp.Evaluate[string](`(s => s.outlineStyle + " " + s.outlineWidth)(getComputedStyle(document.activeElement))`))
	if strings.HasPrefix(ring, "none") || strings.HasSuffix(ring, " 0px") {
		t.Fatalf("%s has the focus but no visible ring: outline %q", got, ring)
	}
	savePNG(t, "docs-code-focus", value(t, ctx, chromedp.CaptureScreenshot())) // the viewport, with the focused block in it
	if err := run(t, ctx, 5*time.Second, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
		t.Fatal(err)
	}
	left := 0.0
	for end := time.Now().Add(5 * time.Second); left <= 0 && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		left = value(t, ctx, chromedp.Evaluate[float64](`document.activeElement.scrollLeft`)) // scrolling may be smooth: it takes a moment
	}
	if left <= 0 {
		t.Fatalf("the arrow key did not scroll %s (scrollLeft %v)", got, left)
	}
}
