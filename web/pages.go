package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab"
)

// home: what DotLab is, claims by state, the latest settled claims, docs.
func (h *Handler) home(w http.ResponseWriter, r *http.Request) {
	sum, err := h.store.ClaimSummary(r.Context(), 10)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	type count struct {
		State dotlab.ClaimState
		N     int
	}
	counts := make([]count, 0, len(dotlab.ClaimStates))
	for _, s := range dotlab.ClaimStates {
		counts = append(counts, count{s, sum.ClaimsByState[s]})
	}
	h.render(w, r, "home", http.StatusOK, page{Title: "DotLab", JSON: "/api/v1/summary", Data: map[string]any{
		"Summary": sum, "Counts": counts, "Docs": h.docs.list, "Windows": h.windows,
	}})
}

const claimsPage = 50

// claims lists claims by id, 50 a page, optionally one state only.
func (h *Handler) claims(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := dotlab.ClaimFilter{State: dotlab.ClaimState(q.Get("state")), After: q.Get("after"), Limit: claimsPage + 1}
	var p dotlab.Problems
	if f.State != "" && !f.State.Valid() {
		p.Add("state", "%q is not a claim state: use one of listed, funded, assigned, running, published, challenge_window, disputed, reviewed, settled", f.State)
	}
	if f.After != "" && !dotlab.ValidClaimID(f.After) {
		p.Add("after", "%q must be a claim id such as DL-0001", f.After)
	}
	if err := p.Err(); err != nil {
		h.fail(w, r, err)
		return
	}
	cs, err := h.store.FindClaims(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	next := ""
	if len(cs) > claimsPage {
		cs = cs[:claimsPage]
		next = cs[len(cs)-1].ID
	}
	api := "/api/v1/claims" + funcs["query"].(func(...string) string)("state", string(f.State), "after", f.After)
	h.render(w, r, "claims", http.StatusOK, page{Title: "Claims", JSON: api, Data: map[string]any{
		"Claims": cs, "State": string(f.State), "Next": next, "After": f.After, "States": dotlab.ClaimStates,
	}})
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
func (h *Handler) claim(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := h.store.FindClaim(ctx, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	events, err := h.store.ClaimEvents(ctx, c.ID, 0)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var run *dotlab.Run
	var chs []*dotlab.Challenge
	var dispute *dotlab.Dispute
	if c.RunID != "" {
		if run, err = h.store.FindRun(ctx, c.RunID); err != nil {
			h.fail(w, r, err)
			return
		}
		if chs, err = h.store.FindChallenges(ctx, c.ID); err != nil {
			h.fail(w, r, err)
			return
		}
		for _, ch := range chs {
			if !ch.Agrees {
				if dispute, err = h.store.FindDispute(ctx, c.ID); err != nil {
					h.fail(w, r, err)
					return
				}
				break
			}
		}
	}
	rows := make([]targetRow, 0, len(c.Manifest.Targets))
	for _, t := range c.Manifest.Targets {
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
	h.render(w, r, "claim", http.StatusOK, page{Title: c.ID + " " + c.Title, JSON: "/api/v1/claims/" + c.ID, Data: map[string]any{
		"Claim": c, "M": c.Manifest, "Steps": lifecycle(c, events), "Events": events, "Run": run,
		"Challenges": chs, "Rows": rows, "Dispute": dispute,
	}})
}

func findComparison(cs []dotlab.Comparison, name string) *dotlab.Comparison {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// logLine is one line of a run's JSON-lines log (runner.LogEntry), or a
// line that is not a JSON object, shown raw.
type logLine struct {
	N     int
	T     string
	Level string
	Step  string
	Msg   string
	Data  string
}

// maxLogLines bounds the timeline; the raw log has every line.
const maxLogLines = 2000

// parseLog reads JSON lines, keeping those that pass the filters.
func parseLog(b []byte, level, stepName, text string) (lines []logLine, total int, levels, steps []string) {
	lv, st := map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	text = strings.ToLower(text)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Bytes()
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		total++
		var e struct {
			T     string          `json:"t"`
			Level string          `json:"level"`
			Step  string          `json:"step"`
			Msg   string          `json:"msg"`
			Data  json.RawMessage `json:"data"`
		}
		l := logLine{N: n}
		if err := json.Unmarshal(raw, &e); err != nil {
			l.Level, l.Msg = "raw", string(raw)
		} else {
			l.T, l.Level, l.Step, l.Msg = e.T, e.Level, e.Step, e.Msg
			if len(e.Data) > 0 && string(e.Data) != "{}" && string(e.Data) != "null" {
				l.Data = string(e.Data)
			}
		}
		lv[l.Level], st[l.Step] = true, true
		if (level != "" && l.Level != level) || (stepName != "" && l.Step != stepName) ||
			(text != "" && !strings.Contains(strings.ToLower(l.Msg+" "+l.Data), text)) {
			continue
		}
		if len(lines) < maxLogLines {
			lines = append(lines, l)
		}
	}
	keys := func(m map[string]bool) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			if k != "" {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	return lines, total, keys(lv), keys(st)
}

// hashRow is one dataset's pinned and observed SHA-256.
type hashRow struct {
	Name, Pinned, Observed string
}

// run: the run record, hashes against the manifest, environment, the
// comparisons and the log as a filterable timeline.
func (h *Handler) run(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run, err := h.store.FindRun(ctx, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	c, err := h.store.FindClaim(ctx, run.ClaimID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var inputs []hashRow
	for _, d := range c.Manifest.Datasets {
		inputs = append(inputs, hashRow{Name: d.Name, Pinned: d.SHA256, Observed: run.Body.InputHashes[d.Name]})
	}
	for _, name := range dotlab.SortedKeys(run.Body.InputHashes) {
		known := false
		for _, d := range c.Manifest.Datasets {
			known = known || d.Name == name
		}
		if !known {
			inputs = append(inputs, hashRow{Name: name, Observed: run.Body.InputHashes[name]})
		}
	}
	var outputs []hashRow
	for _, name := range dotlab.SortedKeys(run.Body.OutputHashes) {
		outputs = append(outputs, hashRow{Name: name, Observed: run.Body.OutputHashes[name]})
	}
	q := r.URL.Query()
	level, stepName, text := q.Get("level"), q.Get("step"), q.Get("q")
	data := map[string]any{"Run": run, "Claim": c, "Inputs": inputs, "Outputs": outputs,
		"Level": level, "Step": stepName, "Q": text, "MaxLines": maxLogLines,
		"LogsURL": "/api/v1/jobs/" + url.PathEscape(c.ID) + "/logs"}
	logs, err := h.store.JobLogs(ctx, c.ID)
	switch {
	case err == nil:
		lines, total, levels, steps := parseLog(logs, level, stepName, text)
		data["Lines"], data["Total"], data["Levels"], data["Steps"], data["HasLogs"] = lines, total, levels, steps, true
	case dotlab.ErrorCode(err) == dotlab.ENOTFOUND:
		data["HasLogs"] = false
	default:
		h.fail(w, r, err)
		return
	}
	h.render(w, r, "run", http.StatusOK, page{Title: "Run " + run.ID, JSON: "/api/v1/runs/" + run.ID, Data: data})
}

// labWindow is how many of a room's latest messages the page shows; the
// rest are in the API (GET /api/v1/labs/{id}/messages).
const labWindow = 200

// lab: members, the latest messages and the claim's state, with the cursor
// the live script resumes from (so nothing is lost or shown twice).
func (h *Handler) lab(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, err := h.store.FindClaim(ctx, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	members, err := h.store.LabMembers(ctx, c.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	latest, _, err := h.store.LabLatest(ctx, c.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	after := max(0, latest-labWindow)
	msgs, err := h.store.LabMessages(ctx, c.ID, after, labWindow+100)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	events, err := h.store.ClaimEvents(ctx, c.ID, 0)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	lastMsg, lastEv := after, int64(0)
	if len(msgs) > 0 {
		lastMsg = msgs[len(msgs)-1].Seq
	}
	if len(events) > 0 {
		lastEv = events[len(events)-1].Seq
	}
	names := map[string]string{}
	for _, m := range members {
		names[m.AgentID] = m.Name
	}
	h.render(w, r, "lab", http.StatusOK, page{Title: "Lab room " + c.ID, JSON: "/api/v1/labs/" + c.ID + "/messages", Data: map[string]any{
		"Claim": c, "Members": members, "Messages": msgs, "Events": events, "Earlier": after,
		"Cursor": formatCursor(lastMsg, lastEv), "Names": names, "Types": dotlab.MessageTypes,
	}})
}

func formatCursor(msg, ev int64) string {
	return strconv.FormatInt(msg, 10) + "." + strconv.FormatInt(ev, 10)
}

// agent: the public profile with standing and recent activity.
func (h *Handler) agent(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := h.store.FindAgent(ctx, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	act, err := h.store.AgentActivity(ctx, p.ID, 50)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	outcomes := make([]map[string]any, 0, len(dotlab.Outcomes))
	for _, o := range dotlab.Outcomes {
		outcomes = append(outcomes, map[string]any{"Outcome": o, "N": p.Outcomes[o]})
	}
	h.render(w, r, "agent", http.StatusOK, page{Title: p.Name + " (" + p.ID + ")", JSON: "/api/v1/agents/" + p.ID, Data: map[string]any{
		"P": p, "Activity": act, "Outcomes": outcomes, "Declines": p.Declines,
	}})
}
