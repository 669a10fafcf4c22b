package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

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
	api := "/api/v1/claims" + queryString("state", string(f.State), "after", f.After)
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
		if dotlab.FirstDisagreeing(chs) != nil {
			if dispute, err = h.store.FindDispute(ctx, c.ID); err != nil {
				h.fail(w, r, err)
				return
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

// logPage is how many lines the timeline shows at once; the raw log has
// every line.
const logPage = 500

// logPageBytes bounds the text of one timeline page, and logField one
// message or data field on it (a single log line may be 8 MiB).
const (
	logPageBytes = 256 << 10
	logField     = 4 << 10
)

// clip cuts s to logField bytes (on a rune boundary) and says how much is left
// out.
func clip(s string) string {
	if len(s) <= logField {
		return s
	}
	cut := logField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " … (" + strconv.Itoa(len(s)) + " bytes in all; see the raw log)"
}

// Known log levels and steps (protocol.txt "Logs"; runner.LogEntry), offered
// as suggestions by the filter form. Other runners may log other steps.
var (
	logLevels = []string{"info", "warn", "error"}
	logSteps  = []string{"run", "inputs", "environment", "code", "execute", "outputs", "results", "compare", "outcome"}
)

// logFilter selects log lines: exact level and step, and text contained
// (case-insensitive) in the message or data.
type logFilter struct {
	Level, Step, Text string
}

func (f logFilter) active() bool { return f.Level != "" || f.Step != "" || f.Text != "" }

// parseLog reads a JSON-lines log from line number from (1-based) and
// returns at most logPage lines passing the filter, and the line number to
// continue from (0 at the end). Lines are tested on their raw bytes before
// they are decoded, so a filtered read of an 8 MiB log decodes only what
// can match.
func parseLog(b []byte, f logFilter, from int) (lines []logLine, next int) {
	text := []byte(strings.ToLower(f.Text))
	// Raw-byte prefilters may only drop lines that cannot match. A line
	// without a backslash has no JSON escapes, so its strings appear in it
	// verbatim: a quoted value is there whatever the spacing, and the text
	// is there as written. Lines with escapes are always decoded.
	quoted := func(v string) []byte {
		if strings.ContainsAny(v, "\"\\") {
			return nil // not verbatim in any line: decode to compare
		}
		return []byte(`"` + v + `"`)
	}
	level, step := quoted(f.Level), quoted(f.Step)
	n, shown := 0, 0
	for len(b) > 0 {
		raw := b
		if k := bytes.IndexByte(b, '\n'); k >= 0 {
			raw, b = b[:k], b[k+1:]
		} else {
			b = nil
		}
		n++
		if n < from || len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if bytes.IndexByte(raw, '\\') < 0 {
			if (len(text) > 0 && !bytes.Contains(bytes.ToLower(raw), text)) ||
				(f.Level != "" && f.Level != "raw" && level != nil && !bytes.Contains(raw, level)) ||
				(f.Step != "" && step != nil && !bytes.Contains(raw, step)) {
				continue
			}
		}
		if len(lines) == logPage || shown > logPageBytes {
			return lines, n
		}
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
		if (f.Level != "" && l.Level != f.Level) || (f.Step != "" && l.Step != f.Step) ||
			(len(text) > 0 && !strings.Contains(strings.ToLower(l.Msg+" "+l.Data), string(text))) {
			continue
		}
		l.Msg, l.Data = clip(l.Msg), clip(l.Data)
		shown += len(l.T) + len(l.Level) + len(l.Step) + len(l.Msg) + len(l.Data)
		lines = append(lines, l)
	}
	return lines, 0
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
	f := logFilter{Level: q.Get("level"), Step: q.Get("step"), Text: q.Get("q")}
	from := 1
	if v := q.Get("from"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			h.fail(w, r, dotlab.Errorf(dotlab.EINVALID, "from: %q must be a line number (1 or more)", v))
			return
		}
		from = n
	}
	data := map[string]any{"Run": run, "Claim": c, "Inputs": inputs, "Outputs": outputs,
		"F": f, "From": from, "Levels": logLevels, "Steps": logSteps, "PageSize": logPage,
		"LogsURL": "/api/v1/jobs/" + url.PathEscape(c.ID) + "/logs"}
	logs, err := h.store.JobLogs(ctx, c.ID)
	switch {
	case err == nil:
		lines, next := parseLog(logs, f, from)
		data["Lines"], data["Next"], data["HasLogs"] = lines, next, true
		data["Total"], data["Bytes"] = bytes.Count(logs, []byte("\n")), len(logs)
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
