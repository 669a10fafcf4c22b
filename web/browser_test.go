package web_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dotlab/dotlab"
)

// Browser tests drive Debian's Chromium through chromedp (the Chrome
// DevTools Protocol) with the launch flags that work on these machines
// (../shared/notes, machine notes): headless, no sandbox (root), no GPU, no
// QUIC, no first-run or background networking, a fresh profile.

// browser starts Chromium for one test; outside CI a missing Chromium skips.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("DOTLAB_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Chromium is required in CI (apt-get install -y chromium): %v", err)
		}
		t.Skipf("Chromium not found at %s (apt-get install -y chromium); skipping outside CI", path)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		// A reader east of UTC: pages must show times in the reader's zone.
		chromedp.Env("TZ=Asia/Tokyo"),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// run runs browser steps with a deadline.
func run(t *testing.T, ctx context.Context, d time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// value runs one action that returns a value, within 10 s, failing the test
// on error.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// screenshot saves the whole page as a PNG artifact in $DOTLAB_ARTIFACTS
// (default: artifacts/screenshots at the repository root).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	savePNG(t, name, value(t, ctx, chromedp.FullScreenshot(100)))
}

// savePNG writes a screenshot artifact.
func savePNG(t *testing.T, name string, png []byte) {
	t.Helper()
	dir := os.Getenv("DOTLAB_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts")
	}
	dir = filepath.Join(dir, "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", p, len(png))
}

// TestBrowserLabLive: a message posted through the API appears in an open
// lab page within a second, and again after the server restarts (the page
// reconnects on its own); nothing is lost or shown twice, and a message
// full of markup is shown as text.
func TestBrowserLabLive(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	url := s.base + "/labs/" + s.labClaim
	if err := run(t, ctx, 20*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`#room[data-live="open"]`))); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	waitMessage := func(seq int64, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		if err := run(t, ctx, within, chromedp.WaitVisible(chromedp.ID(fmt.Sprintf("m%d", seq)))); err != nil {
			t.Fatalf("message %d did not appear within %v: %v", seq, within, err)
		}
		return time.Since(start)
	}
	body := "Live: " + hostileBody
	seq := s.post("collab-cy", s.labClaim, dotlab.LabMessageBody{Type: "finding", To: "all", Body: body, Refs: []string{"results.json", "<b>ref</b>"}})
	t.Logf("message %d shown after %v", seq, waitMessage(seq, time.Second))
	text := value(t, ctx, chromedp.TextContent(chromedp.CSS(fmt.Sprintf("#m%d .body", seq))))
	refs := value(t, ctx, chromedp.TextContent(chromedp.CSS(fmt.Sprintf("#m%d .refs", seq))))
	pwned := value(t, ctx, chromedp.Evaluate[bool](`window.__pwned !== undefined`))
	imgs := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#messages img, #messages script, #messages a[href^='javascript']").length`))
	if text != body || !strings.Contains(refs, "<b>ref</b>") || pwned || imgs != 0 {
		t.Fatalf("live message not shown as text: body %q refs %q pwned %v markup elements %d", text, refs, pwned, imgs)
	}
	screenshot(t, ctx, "lab-live")

	// Restart the server: the stream drops; a message posted before the page
	// reconnects must still arrive (from the backlog after its cursor), and
	// one posted after it must arrive within a second.
	s.restart()
	gap := s.post("collab-cy", s.labClaim, dotlab.LabMessageBody{Type: "note", To: "all", Body: "posted while the page was reconnecting"})
	waitMessage(gap, 15*time.Second)
	if err := run(t, ctx, 15*time.Second, chromedp.WaitVisible(chromedp.CSS(`#room[data-live="open"]`))); err != nil {
		t.Fatalf("page did not reconnect: %v", err)
	}
	after := s.post("collab-cy", s.labClaim, dotlab.LabMessageBody{Type: "handoff", To: s.ids["runner-ada"], Body: "after the restart"})
	t.Logf("message %d shown %v after the restart", after, waitMessage(after, time.Second))

	// A state change appears live too: the runner draws and accepts the job.
	code, job := s.call(http.MethodGet, "/api/v1/jobs/next", "runner-ada", nil)
	if code != http.StatusOK || !strings.Contains(string(job), s.labClaim) {
		t.Fatalf("jobs/next: %d %s", code, job)
	}
	if code, b := s.call(http.MethodPost, "/api/v1/jobs/"+s.labClaim+"/accept", "runner-ada", nil); code != http.StatusOK {
		t.Fatalf("accept: %d %s", code, b)
	}
	start := time.Now()
	if err := run(t, ctx, time.Second, chromedp.WaitVisible(chromedp.CSS(`#claim-state .state-assigned`))); err != nil {
		t.Fatalf("state change not shown within 1 s: %v", err)
	}
	t.Logf("state change shown after %v", time.Since(start))
	hist := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#history-list li")).map(e => e.dataset.seq)`))
	if strings.Join(hist, ",") != "1,2,3" {
		t.Errorf("history on the page %v, want 1,2,3 (listed, funded, assigned)", hist)
	}

	// Every message exactly once, in order.
	seqs := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#messages li.msg")).map(e => e.dataset.seq)`))
	var want []string
	for i := int64(1); i <= after; i++ {
		want = append(want, strconv.FormatInt(i, 10))
	}
	if strings.Join(seqs, ",") != strings.Join(want, ",") {
		t.Fatalf("messages on the page %v, want %v (lost or repeated)", seqs, want)
	}
	screenshot(t, ctx, "lab-after-restart")
}

// TestBrowserClaimHighlights: the claim page of a not_reproduced run marks
// mean_diff as within tolerance and sd_diff as outside, for the official run
// and the challenger's rerun, with different colours and words.
func TestBrowserClaimHighlights(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	if err := run(t, ctx, 20*time.Second, chromedp.Navigate(s.base+"/claims/"+s.disputed), chromedp.WaitVisible(chromedp.ID("comparison-table"))); err != nil {
		t.Fatal(err)
	}
	type cell struct {
		Match, Class, Text, Background string
	}
	read := func(target, side string) cell {
		t.Helper()
		js := fmt.Sprintf(`(() => { const e = document.querySelector('tr[data-target=%q] td[data-side=%q]');
			return e ? {Match: e.dataset.match, Class: e.className, Text: e.textContent.trim(), Background: getComputedStyle(e).backgroundColor} : null })()`, target, side)
		return value(t, ctx, chromedp.Evaluate[cell](js))
	}
	runMean, runSD := read("mean_diff", "run"), read("sd_diff", "run")
	chMean, chSD := read("mean_diff", "challenge"), read("sd_diff", "challenge")
	t.Logf("run: mean %+v sd %+v; challenge: mean %+v sd %+v", runMean, runSD, chMean, chSD)
	if runMean.Match != "true" || runMean.Class != "hit" || !strings.Contains(runMean.Text, "within") {
		t.Errorf("run mean_diff: %+v, want a match", runMean)
	}
	if runSD.Match != "false" || runSD.Class != "miss" || !strings.Contains(runSD.Text, "outside") {
		t.Errorf("run sd_diff: %+v, want a mismatch", runSD)
	}
	if chMean.Match != "true" || chSD.Match != "true" {
		t.Errorf("challenge: mean %+v sd %+v, want both within", chMean, chSD)
	}
	if runMean.Background == runSD.Background || runSD.Background == "rgba(0, 0, 0, 0)" {
		t.Errorf("match and mismatch share a background: %s", runMean.Background)
	}
	outcome := value(t, ctx, chromedp.Text(chromedp.CSS(`section[aria-labelledby="comparison"] > p .outcome`)))
	votes := value(t, ctx, chromedp.Text(chromedp.CSS(`ul.votes`)))
	if outcome != "not reproduced" || !strings.Contains(votes, "sd_diff: Student divides by n") {
		t.Errorf("outcome %q votes %q", outcome, votes)
	}
	// Deadlines and times in the reader's zone (Tokyo, UTC+9): the challenge
	// window closed at 01:00 UTC, shown as 10:00; the UTC time stays in the title.
	deadline := value(t, ctx, chromedp.Evaluate[[]string](`(() => { const e = document.querySelector('.deadlines time'); return [e.textContent, e.title] })()`))
	if !strings.Contains(deadline[0], "10:00") || !strings.Contains(deadline[0], "GMT+9") || deadline[1] != "2026-01-01 01:00 UTC" {
		t.Errorf("deadline shown as %q (title %q), want 10:00 GMT+9 for a reader in Tokyo", deadline[0], deadline[1])
	}
	screenshot(t, ctx, "claim-not-reproduced")
	// The run page and the front page render too (screenshots for review).
	for name, path := range map[string]string{"run": "/runs/" + s.runNotReproduced, "home": "/", "claims": "/claims", "doc": "/docs/manifest-spec"} {
		if err := run(t, ctx, 20*time.Second, chromedp.Navigate(s.base+path), chromedp.WaitVisible(chromedp.CSS(`main`))); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, name)
	}
	// On a phone (390 CSS px) no page scrolls sideways: wide tables scroll
	// inside their own box.
	if err := run(t, ctx, 10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2))); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"phone-claim": "/claims/" + s.disputed, "phone-run": "/runs/" + s.runNotReproduced, "phone-lab": "/labs/" + s.labClaim, "phone-home": "/"} {
		if err := run(t, ctx, 20*time.Second, chromedp.Navigate(s.base+path), chromedp.WaitVisible(chromedp.CSS(`main`))); err != nil {
			t.Fatal(err)
		}
		w := value(t, ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
		if w[0] > w[1] {
			t.Errorf("%s: page is %d px wide on a %d px phone screen", path, w[0], w[1])
		}
		// What the phone's screen shows: the first 390×844 px.
		savePNG(t, name, value(t, ctx, chromedp.CaptureScreenshot()))
	}
}

// TestBrowserProfileStanding: the profile page shows the standing that
// GET /api/v1/agents/{id} reports.
func TestBrowserProfileStanding(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	for _, name := range []string{"runner-ada", "challenger-bo", "reviewer-0", "reviewer-1"} {
		var p dotlab.AgentProfile
		s.apiJSON("/api/v1/agents/"+s.ids[name], &p)
		if err := run(t, ctx, 20*time.Second, chromedp.Navigate(s.base+"/agents/"+p.ID)); err != nil {
			t.Fatal(err)
		}
		shown := value(t, ctx, chromedp.Text(chromedp.ID("standing")))
		attr := value(t, ctx, chromedp.AttributeValue(chromedp.ID("standing"), "data-standing")).Value
		got, err := strconv.ParseFloat(strings.TrimPrefix(shown, "+"), 64)
		if err != nil || got != p.Standing || attr != strconv.FormatFloat(p.Standing, 'g', -1, 64) {
			t.Errorf("%s: page shows %q (attr %q), API says %v", name, shown, attr, p.Standing)
		}
		t.Logf("%s: standing %v shown as %q", name, p.Standing, shown)
		if name == "runner-ada" {
			screenshot(t, ctx, "profile")
		}
	}
}

// TestBrowserEscaping: the manifest title and a lab message full of
// markup and script are shown as text and run nothing.
func TestBrowserEscaping(t *testing.T) {
	s := newSite(t)
	ctx := browser(t)
	for _, path := range []string{"/claims/" + s.labClaim, "/labs/" + s.labClaim} {
		if err := run(t, ctx, 20*time.Second, chromedp.Navigate(s.base+path),
			chromedp.WaitVisible(chromedp.CSS(`main`)),
			chromedp.Sleep(300*time.Millisecond), // let any injected handler fire
		); err != nil {
			t.Fatal(err)
		}
		h1 := value(t, ctx, chromedp.TextContent(chromedp.CSS(`h1`)))
		title := value(t, ctx, chromedp.Title())
		pwned := value(t, ctx, chromedp.Evaluate[bool](`window.__pwned !== undefined`))
		// The claim's own badge is the one image a claim page shows.
		injected := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("main img:not(img.badge[src$='/badge.svg']), main b, main script, main a[href^='javascript']").length`))
		if pwned || injected != 0 {
			t.Errorf("%s: markup became elements (pwned %v, %d injected elements)", path, pwned, injected)
		}
		if path == "/claims/"+s.labClaim && (!strings.Contains(h1, hostileTitle) || !strings.Contains(title, "<script>")) {
			t.Errorf("%s: title not shown as text: h1 %q title %q", path, h1, title)
		}
		if strings.HasPrefix(path, "/labs/") {
			body := value(t, ctx, chromedp.TextContent(chromedp.CSS(`#m3 .body`)))
			if body != hostileBody {
				t.Errorf("message shown as %q, want the text %q", body, hostileBody)
			}
		}
		screenshot(t, ctx, "escaping-"+strings.Split(strings.Trim(path, "/"), "/")[0])
	}
}
