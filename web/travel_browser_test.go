package web_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// axeResult is what the page's axe-core run reports.
type axeResult struct {
	Violations []struct {
		ID    string `json:"id"`
		Help  string `json:"help"`
		Nodes []struct {
			Target []string `json:"target"`
		} `json:"nodes"`
	} `json:"violations"`
	Passes int `json:"passes"`
}

// axe runs axe-core (.ci/node, installed by .ci/run) on the open page
// against WCAG 2.1 A and AA and returns its violations.
func axe(t *testing.T, ctx context.Context) axeResult {
	t.Helper()
	src, err := os.ReadFile(nodeTool(t, "axe-core/axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	value(t, ctx, chromedp.Evaluate[bool](string(src)+";true"))
	js := `axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}}).then(r => ({violations: r.violations, passes: r.passes.length}))`
	return value(t, ctx, chromedp.Evaluate[axeResult](js, chromedp.EvalAwaitPromise))
}

// TestBrowserTargetsPlot: on a claim with huge, tiny and negative targets
// and a zero tolerance, rerun by the runner and a challenger, the plot
// draws every band and mark inside the picture, is an image with a name
// and a description, and the page has no axe-core violation; the
// screenshots (artifacts) show it, with the badge and a settled claim's
// page whose hostile title stays text in the JSON-LD.
func TestBrowserTargetsPlot(t *testing.T) {
	s := newSite(t)
	_, c := seedTravel(s)
	ctx := browser(t)
	if err := run(t, ctx, 20*time.Second, chromedp.Navigate(s.base+"/claims/"+c.extreme), chromedp.WaitVisible(chromedp.ID("targets-plot"))); err != nil {
		t.Fatal(err)
	}
	type geometry struct {
		Role, Name, Desc       string
		Rows, Runs, Challenges int
		Outside                []string
		TableRows              int
		SVG                    [4]float64
	}
	g := value(t, ctx, chromedp.Evaluate[geometry](`(() => {
		const svg = document.querySelector("#targets-plot svg"), box = svg.getBoundingClientRect();
		const ids = svg.getAttribute("aria-labelledby").split(" ");
		const outside = [];
		for (const e of svg.querySelectorAll(".plot-row rect, .plot-row circle, .plot-row path, .plot-row line.published, .plot-row text")) {
			const b = e.getBoundingClientRect();
			if (b.left < box.left - 0.5 || b.right > box.right + 0.5 || b.top < box.top - 0.5 || b.bottom > box.bottom + 0.5)
				e.closest(".plot-row") && outside.push(e.closest(".plot-row").dataset.target + " " + e.tagName + " " + Math.round(b.left) + ".." + Math.round(b.right));
		}
		return {Role: svg.getAttribute("role"), Name: document.getElementById(ids[0]).textContent, Desc: document.getElementById(ids[1]).textContent,
			Rows: svg.querySelectorAll(".plot-row").length, Runs: svg.querySelectorAll(".plot-row circle.run").length,
			Challenges: svg.querySelectorAll(".plot-row path.challenge").length, Outside: outside,
			TableRows: document.querySelectorAll("#comparison-table tbody tr").length, SVG: [box.left, box.top, box.width, box.height]};
	})()`))
	t.Logf("plot: %+v", g)
	if g.Role != "img" || !strings.Contains(g.Name, "tolerance band") || !strings.Contains(g.Desc, "huge — published 1.7976931348623157e308") ||
		!strings.Contains(g.Desc, "challenge 1 -1.7976931348623157e308, outside tolerance") || !strings.Contains(g.Desc, "zero_tol — published 0 ± 0") {
		t.Errorf("plot is not a described image: %+v", g)
	}
	if g.Rows != 4 || g.Runs != 4 || g.Challenges != 4 || g.TableRows != 4 || len(g.Outside) != 0 || g.SVG[2] < 300 {
		t.Errorf("plot geometry: %+v", g)
	}
	savePNG(t, "plot-extremes", value(t, ctx, chromedp.Screenshot(chromedp.CSS(`section[aria-labelledby="comparison"]`))))
	screenshot(t, ctx, "claim-plot-extremes")
	checkAxe(t, ctx, "/claims/"+c.extreme)

	// A settled claim with a hostile title: the JSON-LD is data, its title
	// intact, nothing ran; the badge image loads.
	if err := run(t, ctx, 20*time.Second, chromedp.Navigate(s.base+"/claims/"+c.hostile), chromedp.WaitVisible(chromedp.ID("targets-plot")),
		chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	ld := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('script[type="application/ld+json"]')).map(e => JSON.parse(e.textContent).claimReviewed)`))
	pwned := value(t, ctx, chromedp.Evaluate[bool](`window.__pwned !== undefined`))
	badge := value(t, ctx, chromedp.Evaluate[int](`document.querySelector("img.badge").naturalWidth`))
	if len(ld) != 1 || ld[0] != travelTitle || pwned || badge < 100 {
		t.Errorf("hostile claim page: JSON-LD titles %q, pwned %v, badge width %d", ld, pwned, badge)
	}
	screenshot(t, ctx, "claim-settled-share")
	checkAxe(t, ctx, "/claims/"+c.hostile)
	for name, id := range map[string]string{"badge-reproduced": s.reproduced, "badge-not-reproduced": c.notReproduced, "badge-open": c.window, "badge-spec-issue": c.specIssue} {
		if err := run(t, ctx, 20*time.Second, chromedp.Navigate(s.base+"/claims/"+id+"/badge.svg"), chromedp.WaitVisible(chromedp.CSS("svg"))); err != nil {
			t.Fatal(err)
		}
		savePNG(t, name, value(t, ctx, chromedp.Screenshot(chromedp.CSS("svg"))))
	}
}

// checkAxe fails the test on any axe-core violation of the open page.
func checkAxe(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	res := axe(t, ctx)
	for _, v := range res.Violations {
		var where []string
		for _, n := range v.Nodes {
			where = append(where, fmt.Sprint(n.Target))
		}
		t.Errorf("%s: axe %s: %s at %s", path, v.ID, v.Help, strings.Join(where, ", "))
	}
	t.Logf("%s: axe-core: %d violations, %d rules passed", path, len(res.Violations), res.Passes)
}
