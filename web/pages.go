package web

import (
	"bytes"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/tlogfmt"
)

// Each page handler fills one view struct, the Data of its template (field
// names are the ones the template uses), or returns an error for the error
// page (Handler.handle).

// homeView is the front page's data.
type homeView struct {
	Summary *dotlab.Summary
	Counts  []stateCount
	Docs    []*doc
	Windows dotlab.Windows
}

// stateCount is how many claims are in one state.
type stateCount struct {
	State dotlab.ClaimState
	N     int
}

// home: what DotLab is, claims by state, the latest settled claims, docs.
func (h *Handler) home(w http.ResponseWriter, r *http.Request) error {
	sum, err := h.store.ClaimSummary(r.Context(), 10)
	if err != nil {
		return err
	}
	counts := make([]stateCount, 0, len(dotlab.ClaimStates))
	for _, s := range dotlab.ClaimStates {
		counts = append(counts, stateCount{s, sum.ClaimsByState[s]})
	}
	h.render(w, r, "home", http.StatusOK, page{Title: "DotLab", JSON: apiOf("/"), Data: homeView{
		Summary: sum, Counts: counts, Docs: h.docs.list, Windows: h.windows,
	}})
	return nil
}

const claimsPage = 50

// claimsView is the claim list's data: one page of claims, the state
// filter and the paging ids.
type claimsView struct {
	Claims []*dotlab.Claim
	State  string
	Next   string // the last claim shown, when there are more
	After  string
	States []dotlab.ClaimState
}

// claims lists claims by id, 50 a page, optionally one state only.
func (h *Handler) claims(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := dotlab.Page{State: dotlab.ClaimState(q.Get("state")), After: q.Get("after"), Limit: claimsPage + 1}
	var p dotlab.Problems
	if f.State != "" && !f.State.Valid() {
		p.Add("state", "%q is not a claim state: use one of listed, funded, assigned, running, published, challenge_window, disputed, reviewed, settled", f.State)
	}
	if f.After != "" && !dotlab.ValidClaimID(f.After) {
		p.Add("after", "%q must be a claim id such as DL-0001", f.After)
	}
	if err := p.Err(); err != nil {
		return err
	}
	cs, err := h.store.FindClaims(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(cs) > claimsPage {
		cs = cs[:claimsPage]
		next = cs[len(cs)-1].ID
	}
	api := apiOf("/claims") + queryString("state", string(f.State), "after", f.After)
	h.render(w, r, "claims", http.StatusOK, page{Title: "Claims", JSON: api, Data: claimsView{
		Claims: cs, State: string(f.State), Next: next, After: f.After, States: dotlab.ClaimStates,
	}})
	return nil
}

// claimView is a claim's page: the claim and its manifest, its lifecycle,
// the official run beside every challenge, and the dispute if there is one.
type claimView struct {
	Claim      *dotlab.Claim
	M          *dotlab.Manifest
	Steps      []step
	Events     []dotlab.ClaimEvent
	Run        *dotlab.Run // nil before the run is published
	Challenges []*dotlab.Challenge
	Rows       []targetRow
	Dispute    *dotlab.Dispute // nil unless a challenge disagrees
	Log        *logRef         // the listing's log entry; nil without one
	// Patches are the manifest's declared code.patches, each with its
	// files and line counts; Streams the captured streams' hashes of the
	// official run beside every challenge's (evidence.go).
	Patches []manifest.PatchSummary
	Streams []streamRow
	// Plot draws Rows (plot.go); ClaimReview is the schema.org JSON-LD of a
	// settled reproduced or not_reproduced claim, "" otherwise
	// (claimreview.go); Share is the badge and, once settled, the citations.
	Plot        *plot
	ClaimReview template.JS
	Share       share
	// Canary is one row per pinned input URL with its latest canary
	// report (none: not checked yet).
	Canary []canaryRow
}

// canaryRow is one pinned input URL of a claim and the latest canary
// report on it (nil: no agent has checked it).
type canaryRow struct {
	Input  dotlab.PinnedInput
	Report *dotlab.CanaryReport
}

// canaryRows pairs each pinned http(s) URL of m with its latest report.
func canaryRows(m *dotlab.Manifest, reports []dotlab.CanaryReport) []canaryRow {
	by := map[string]*dotlab.CanaryReport{}
	for i := range reports {
		by[reports[i].URL] = &reports[i]
	}
	var rows []canaryRow
	seen := map[string]bool{}
	for _, p := range m.PinnedInputs() {
		if seen[p.URL] || !(strings.HasPrefix(p.URL, "http://") || strings.HasPrefix(p.URL, "https://")) {
			continue
		}
		seen[p.URL] = true
		rows = append(rows, canaryRow{Input: p, Report: by[p.URL]})
	}
	return rows
}

// share is what a claim page offers to paste elsewhere: the badge's URL and
// its markdown (absolute with the server's public URL, else paths the
// reader completes), and whether the record can be cited yet.
type share struct {
	Badge, Markdown string
	Alt             string // the badge's text
	Absolute        bool
	Citable         bool
}

// claimShare fills the claim page's share section (run: the official run,
// nil before one is published).
func (h *Handler) claimShare(c *dotlab.Claim, run *dotlab.Run) share {
	badge, page := h.abs("/claims/"+c.ID+"/badge.svg"), h.abs("/claims/"+c.ID)
	var runOutcome dotlab.Outcome
	if run != nil {
		runOutcome = run.Outcome
	}
	b := claimBadge(c, runOutcome)
	return share{Badge: badge, Markdown: "[![DotLab " + c.ID + "](" + badge + ")](" + page + ")", Alt: b.Label + ": " + b.Message,
		Absolute: h.publicURL != "", Citable: c.State == dotlab.StateSettled}
}

// targetRow is one target of a claim compared across the official run and
// every challenge.
type targetRow struct {
	Target     dotlab.Target
	Official   *dotlab.Comparison
	Challenges []challengeCell
}

type challengeCell struct {
	Comparison *dotlab.Comparison // the challenger's rerun against the target
	Difference *dotlab.Difference // challenger − runner
}

// claim: the claim, its manifest, lifecycle, and the official run beside
// every challenge, target by target; votes with their rationales.
func (h *Handler) claim(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c, err := h.store.FindClaim(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	v := claimView{Claim: c, M: c.Manifest}
	if v.Events, err = h.store.ClaimEvents(ctx, c.ID, 0); err != nil {
		return err
	}
	if c.RunID != "" {
		if v.Run, err = h.store.FindRun(ctx, c.RunID); err != nil {
			return err
		}
		if v.Challenges, err = h.store.FindChallenges(ctx, c.ID); err != nil {
			return err
		}
		if dotlab.FirstDisagreeing(v.Challenges) != nil {
			if v.Dispute, err = h.store.FindDispute(ctx, c.ID); err != nil {
				return err
			}
		}
	}
	if v.Log, err = h.logRef(ctx, tlogfmt.TypeClaim, c.ID, c.ID); err != nil {
		return err
	}
	v.Steps = lifecycle(c, v.Events)
	v.Rows = targetRows(c.Manifest.Targets, v.Run, v.Challenges)
	v.Patches = manifest.SummarizePatches(c.Manifest.Code.Patches)
	v.Streams = streamRows(v.Run, v.Challenges)
	v.Plot, v.Share = targetPlot(v.Rows), h.claimShare(c, v.Run)
	if v.ClaimReview, err = h.claimReviewJSON(c); err != nil {
		return err
	}
	reports, err := h.store.LatestCanaryReports(ctx, c.ID)
	if err != nil {
		return err
	}
	v.Canary = canaryRows(c.Manifest, reports)
	h.render(w, r, "claim", http.StatusOK, page{Title: c.ID + " " + c.Title, JSON: apiOf("/claims/" + c.ID), Data: v})
	return nil
}

// targetRows lays the official run (nil before it is published) and every
// challenge side by side, one row per target.
func targetRows(targets []dotlab.Target, run *dotlab.Run, chs []*dotlab.Challenge) []targetRow {
	rows := make([]targetRow, 0, len(targets))
	for _, t := range targets {
		row := targetRow{Target: t}
		if run != nil {
			row.Official = findComparison(run.Comparisons, t.Name)
		}
		for _, ch := range chs {
			cell := challengeCell{Comparison: findComparison(ch.Comparisons, t.Name)}
			for i := range ch.Differences {
				if ch.Differences[i].Name == t.Name {
					cell.Difference = &ch.Differences[i]
				}
			}
			row.Challenges = append(row.Challenges, cell)
		}
		rows = append(rows, row)
	}
	return rows
}

func findComparison(cs []dotlab.Comparison, name string) *dotlab.Comparison {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// runView is a run's page: the record, its hashes against the manifest and
// the log timeline (log.go) with its filter and paging.
type runView struct {
	Log      *logRef // the run's log entry; nil without one
	Run      *dotlab.Run
	Claim    *dotlab.Claim
	Inputs   []hashRow
	Outputs  []hashRow
	Printed  []printedRow // a spec_issue run's uncompared values (evidence.go)
	F        logFilter
	From     int // the first line number read
	Levels   []string
	Steps    []string
	PageSize int
	LogsURL  string // the raw log in the API
	HasLogs  bool   // the claim's runner has uploaded logs; the rest is set only then
	Lines    []logLine
	Next     int // the line to continue from, 0 at the end
	Total    int // lines in the log
	Bytes    int
}

// hashRow is one dataset's pinned and observed SHA-256.
type hashRow struct {
	Name, Pinned, Observed string
}

// run: the run record, hashes against the manifest, environment, the
// comparisons and the log as a filterable timeline.
func (h *Handler) run(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	run, err := h.store.FindRun(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	c, err := h.store.FindClaim(ctx, run.ClaimID)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	v := runView{Run: run, Claim: c, F: logFilter{Level: q.Get("level"), Step: q.Get("step"), Text: q.Get("q")},
		From: 1, Levels: logLevels, Steps: logSteps, PageSize: logPage,
		LogsURL: "/api/v1/jobs/" + url.PathEscape(c.ID) + "/logs"}
	v.Inputs, v.Outputs = hashRows(c.Manifest, run.Body.InputHashes, run.Body.OutputHashes)
	v.Printed = printedRows(c.Manifest, run.Body.Uncompared)
	if s := q.Get("from"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return dotlab.Errorf(dotlab.EINVALID, "from: %q must be a line number (1 or more)", s)
		}
		v.From = n
	}
	if v.Log, err = h.logRef(ctx, tlogfmt.TypeRun, run.ID, run.ID); err != nil {
		return err
	}
	logs, err := h.store.JobLogs(ctx, c.ID)
	switch {
	case err == nil:
		v.HasLogs = true
		v.Lines, v.Next = parseLog(logs, v.F, v.From)
		v.Total, v.Bytes = bytes.Count(logs, []byte("\n")), len(logs)
	case dotlab.ErrorCode(err) != dotlab.ENOTFOUND:
		return err
	}
	h.render(w, r, "run", http.StatusOK, page{Title: "Run " + run.ID, JSON: apiOf("/runs/" + run.ID), Data: v})
	return nil
}

// hashRows puts each dataset's, helper's and download's pinned hash beside
// the observed one (helpers under "helper:<name>", downloads under
// "download:<name>", as runs record them; observed inputs
// the manifest does not name after them), and lists the output hashes by name.
func hashRows(m *dotlab.Manifest, in, out map[string]string) (inputs, outputs []hashRow) {
	pinned := map[string]bool{}
	for _, d := range m.Datasets {
		inputs = append(inputs, hashRow{Name: d.Name, Pinned: d.SHA256, Observed: in[d.Name]})
		pinned[d.Name] = true
	}
	for _, h := range m.Helpers {
		key := dotlab.HelperInputKey(h.Name)
		inputs = append(inputs, hashRow{Name: key, Pinned: h.SHA256, Observed: in[key]})
		pinned[key] = true
	}
	for _, d := range m.Downloads {
		key := dotlab.DownloadInputKey(d.Name)
		inputs = append(inputs, hashRow{Name: key, Pinned: d.SHA256, Observed: in[key]})
		pinned[key] = true
	}
	for _, name := range dotlab.SortedKeys(in) {
		if !pinned[name] {
			inputs = append(inputs, hashRow{Name: name, Observed: in[name]})
		}
	}
	for _, name := range dotlab.SortedKeys(out) {
		outputs = append(outputs, hashRow{Name: name, Observed: out[name]})
	}
	return inputs, outputs
}

// labWindow is how many of a room's latest messages the page shows; the
// rest are in the API (GET /api/v1/labs/{id}/messages).
const labWindow = 200

// labView is a lab room's page: members, the latest messages and the
// claim's state changes, with the cursor the live script resumes from.
type labView struct {
	Claim    *dotlab.Claim
	Members  []dotlab.LabMember
	Messages []dotlab.LabMessage
	Events   []dotlab.ClaimEvent
	Earlier  int64             // messages up to this seq are not shown
	Cursor   string            // "M.E" (apiv1.Cursor) of the last message and event shown
	Names    map[string]string // agent id → name, of the members
	Types    []string
}

// lab: members, the latest messages and the claim's state, with the cursor
// the live script resumes from (so nothing is lost or shown twice;
// docs/protocol.md §9 "The public pages").
func (h *Handler) lab(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c, err := h.store.FindClaim(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	v := labView{Claim: c, Types: dotlab.MessageTypes, Names: map[string]string{}}
	if v.Members, err = h.store.LabMembers(ctx, c.ID); err != nil {
		return err
	}
	latest, _, err := h.store.LabLatest(ctx, c.ID)
	if err != nil {
		return err
	}
	v.Earlier = max(0, latest-labWindow)
	if v.Messages, err = h.store.LabMessages(ctx, c.ID, v.Earlier, labWindow+100); err != nil {
		return err
	}
	if v.Events, err = h.store.ClaimEvents(ctx, c.ID, 0); err != nil {
		return err
	}
	cur := apiv1.Cursor{Msg: v.Earlier}
	if len(v.Messages) > 0 {
		cur.Msg = v.Messages[len(v.Messages)-1].Seq
	}
	if len(v.Events) > 0 {
		cur.Ev = v.Events[len(v.Events)-1].Seq
	}
	v.Cursor = cur.String()
	for _, m := range v.Members {
		v.Names[m.AgentID] = m.Name
	}
	h.render(w, r, "lab", http.StatusOK, page{Title: "Lab room " + c.ID, JSON: apiOf("/labs/" + c.ID), Data: v})
	return nil
}

// agentView is an agent's public profile with its standing and recent
// activity.
type agentView struct {
	P        *dotlab.AgentProfile
	Activity []dotlab.Activity
	Outcomes []outcomeCount
	Declines map[string]int
}

// outcomeCount is how many of an agent's published runs had one outcome.
type outcomeCount struct {
	Outcome dotlab.Outcome
	N       int
}

// agent: the public profile with standing and recent activity.
func (h *Handler) agent(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p, err := h.store.FindAgent(ctx, r.PathValue("id"))
	if err != nil {
		return err
	}
	act, err := h.store.AgentActivity(ctx, p.ID, 50)
	if err != nil {
		return err
	}
	outcomes := make([]outcomeCount, 0, len(dotlab.Outcomes))
	for _, o := range dotlab.Outcomes {
		outcomes = append(outcomes, outcomeCount{o, p.Outcomes[o]})
	}
	h.render(w, r, "agent", http.StatusOK, page{Title: p.Name + " (" + p.ID + ")", JSON: apiOf("/agents/" + p.ID), Data: agentView{
		P: p, Activity: act, Outcomes: outcomes, Declines: p.Declines,
	}})
	return nil
}
