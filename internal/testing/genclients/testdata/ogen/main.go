// Command ogendriver drives a claim's lifecycle through the client ogen
// generates from spec/openapi.yaml (into ./api, next to this file, by
// TestOgenClientLifecycle), against a live DotLab server:
//
//	ogendriver BASE_URL MANIFEST EXTREME_MANIFEST (the manifests' text)
//
// It exits 0 after printing "ok", or 1 naming the step that failed. Every
// decimal goes through ogen's format: decimal mapping (decimal.Decimal) and
// is checked exactly.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/ogen-go/ogen/ogenerrors"
	"github.com/shopspring/decimal"

	"ogendriver/api"
)

func main() {
	if len(os.Args) != 4 {
		fail("usage: ogendriver BASE_URL MANIFEST EXTREME_MANIFEST")
	}
	d := &driver{ctx: context.Background(), base: os.Args[1], agents: map[string]*agent{}}
	d.anon = d.client("")
	d.lifecycle(os.Args[2], os.Args[3])
	fmt.Println("ok")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// as returns r as the answer type T, or fails naming what came instead.
func as[T any](r any, err error) T {
	if err != nil {
		fail("%T: %v", *new(T), err)
	}
	v, ok := r.(T)
	if !ok {
		fail("want %T, the server answered %T %+v", *new(T), r, r)
	}
	return v
}

func dec(s string) api.Decimal { return api.Decimal(decimal.RequireFromString(s)) }

// exact reports whether d is exactly the decimal s.
func exact(d api.Decimal, s string) bool {
	return decimal.Decimal(d).Equal(decimal.RequireFromString(s))
}

type key string

// Bearer sends the agent's key; the anonymous client (no key) sends none.
func (k key) Bearer(context.Context, api.OperationName) (api.Bearer, error) {
	if k == "" {
		return api.Bearer{}, ogenerrors.ErrSkipClientSecurity
	}
	return api.Bearer{Token: string(k)}, nil
}

type agent struct {
	id string
	c  *api.Client
}

type driver struct {
	ctx    context.Context
	base   string
	anon   *api.Client
	agents map[string]*agent
}

func (d *driver) client(k string) *api.Client {
	c, err := api.NewClient(d.base, key(k))
	if err != nil {
		fail("client: %v", err)
	}
	return c
}

func (d *driver) lifecycle(manifest, extreme string) {
	st := as[*api.Status](d.anon.GetStatus(d.ctx))
	if len(st.ManifestSpecVersions) == 0 {
		fail("status: %+v", st)
	}
	for _, n := range []string{"submitter", "runner", "challenger", "reviewer1", "reviewer2", "reviewer3"} {
		r := as[*api.AgentCreated](d.anon.CreateAgent(d.ctx, &api.NewAgent{Name: n, Operator: "ogen test",
			Capabilities: api.NewOptNilStringArray([]string{"python"})}))
		d.agents[n] = &agent{id: r.AgentID, c: d.client(r.APIKey)}
	}
	if me := as[*api.AgentProfile](d.agents["runner"].c.GetAgentMe(d.ctx)); me.AgentID != d.agents["runner"].id {
		fail("me: %+v", me)
	}
	claim := d.list(manifest)
	if v := claim.Manifest.Targets[1].Value; v != 4.0621234567 {
		fail("t_paired target reads %v", v)
	}
	page := as[*api.ClaimPage](d.anon.ListClaims(d.ctx, api.ListClaimsParams{State: api.NewOptClaimState(api.ClaimStateFunded)}))
	if len(page.Claims) != 1 || page.Claims[0].ID != claim.ID {
		fail("funded claims: %+v", page.Claims)
	}
	d.take(claim.ID)
	d.room(claim.ID)
	run := d.publish(claim, map[string]string{"mean_diff": "1.58", "t_paired": "4.0621234567"}, api.RunBodyOutcomeReproduced)
	cmp := run.Comparisons[1]
	if cmp.Name != "t_paired" || !exact(cmp.Rerun, "4.0621234567") || !exact(cmp.Difference, "0") || !cmp.Match {
		fail("t_paired as the server compared it: %+v", cmp)
	}
	got := as[*api.Run](d.anon.GetRun(d.ctx, api.GetRunParams{ID: run.ID}))
	if c := got.Body.Comparisons[1]; !exact(c.Rerun, "4.0621234567") {
		fail("the run's body holds %v", decimal.Decimal(c.Rerun))
	}
	runs := as[*api.RunPage](d.anon.ListRuns(d.ctx, api.ListRunsParams{Status: api.NewOptClaimState(api.ClaimStateChallengeWindow)}))
	if len(runs.Runs) != 1 || runs.Runs[0].ID != run.ID {
		fail("runs in the challenge window: %+v", runs.Runs)
	}
	d.firstEvent(claim.ID)
	d.newFields(claim.ID, run.ID)
	d.challenge(claim)
	d.votes(claim.ID)
	d.extreme(extreme)
}

// list lists the manifest as the submitter and returns the claim.
func (d *driver) list(manifest string) api.ClaimDetail {
	r := as[*api.ClaimDetailHeaders](d.agents["submitter"].c.CreateClaim(d.ctx, &api.ClaimSubmission{
		Manifest: api.NewStringClaimSubmissionManifest(manifest), Field: "statistics"}))
	return r.Response
}

// take draws and accepts the claim's job as the runner.
func (d *driver) take(claim string) {
	runner := d.agents["runner"].c
	job := as[*api.Job](runner.NextJob(d.ctx))
	if job.ClaimID != claim || job.State != api.JobStateOffered {
		fail("drew %+v", job)
	}
	if acc := as[*api.Job](runner.AcceptJob(d.ctx, api.AcceptJobParams{ID: claim})); !acc.PublishDeadline.Set {
		fail("accepted without a deadline: %+v", acc)
	}
}

func (d *driver) room(claim string) {
	runner := d.agents["runner"].c
	as[*api.LabMember](runner.JoinLab(d.ctx, &api.JoinBody{Role: api.JoinBodyRoleRunner}, api.JoinLabParams{ID: claim}))
	msg := as[*api.LabMessage](runner.PostLabMessage(d.ctx, &api.LabMessageBody{Type: api.LabMessageBodyTypeNote, To: "all",
		Body: "t_paired reruns to 4.0621234567"}, api.PostLabMessageParams{ID: claim}))
	if msg.Seq != 1 {
		fail("message: %+v", msg)
	}
}

// runBody is a rerun of the claim's manifest with the given values: its
// datasets' hashes, image digest and seed, as the claim gives them.
func runBody(claim api.ClaimDetail, values map[string]string) (api.OptNilHashMap, api.OptRunEnvironment, api.OptNilRunComparisonArray) {
	in := api.HashMap{}
	for _, ds := range claim.Manifest.Datasets {
		in[ds.Name] = api.SHA256(ds.SHA256)
	}
	_, digest, _ := strings.Cut(claim.Manifest.Environment.Image, "@")
	env := api.RunEnvironment{ImageDigest: api.NewOptString(digest)}
	if claim.Manifest.Seed.Set {
		env.Seed = api.NewOptNilInt64(claim.Manifest.Seed.Value)
	}
	var cs []api.RunComparison
	for _, t := range claim.Manifest.Targets {
		cs = append(cs, api.RunComparison{Name: t.Name, Rerun: dec(values[t.Name])})
	}
	return api.NewOptNilHashMap(in), api.NewOptRunEnvironment(env), api.NewOptNilRunComparisonArray(cs)
}

func (d *driver) publish(claim api.ClaimDetail, values map[string]string, outcome api.RunBodyOutcome) api.PublishedRun {
	in, env, cs := runBody(claim, values)
	body := &api.RunBody{JobID: claim.ID, InputHashes: in, OutputHashes: api.NewOptNilHashMap(api.HashMap{}),
		Environment: env, Comparisons: cs, Outcome: outcome}
	return as[*api.PublishedRunHeaders](d.agents["runner"].c.PublishRun(d.ctx, body)).Response
}

// firstEvent opens the room's live stream (raw: x-ogen-raw-response) and
// reads up to its first event.
func (d *driver) firstEvent(claim string) {
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	raw := as[*api.StreamLabEventsOKRawTextEventStream](d.anon.StreamLabEvents(ctx, api.StreamLabEventsParams{ID: claim}))
	defer raw.Response.Body.Close()
	sc := bufio.NewScanner(raw.Response.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "event: ") {
			return
		}
	}
	fail("the stream ended before an event: %v", sc.Err())
}

// newFields: a later server may add fields to any response object (the
// document keeps response schemas open), and ogen's decoder ignores them:
// the run and the claim as served, with a field added at the top, in the
// run's environment and comparisons and in the claim's manifest, decode.
func (d *driver) newFields(claim, run string) {
	added := `"added_later":{"x":1},`
	body := d.raw("/runs/" + run)
	for _, at := range []string{`{"id":`, `"environment":{`, `"comparisons":[{`} {
		i := strings.Index(body, at)
		if i < 0 {
			fail("the run as served has no %s: %.300s", at, body)
		}
		j := i + strings.LastIndex(at, "{") + 1 // just inside the object
		body = body[:j] + added + body[j:]
	}
	if err := new(api.Run).UnmarshalJSON([]byte(body)); err != nil {
		fail("a run with new fields: %v\n%.300s", err, body)
	}
	c := d.raw("/claims/" + claim)
	if !strings.Contains(c, `"manifest":{`) {
		fail("the claim as served has no manifest")
	}
	c = strings.Replace(c, `"manifest":{`, `"manifest":{`+added, 1)
	if err := new(api.ClaimDetail).UnmarshalJSON([]byte(c)); err != nil {
		fail("a claim whose manifest has a new field: %v", err)
	}
}

// raw GETs base+path and returns the body as sent.
func (d *driver) raw(path string) string {
	res, err := http.Get(d.base + path)
	if err != nil {
		fail("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil || res.StatusCode != 200 {
		fail("GET %s: %d %v", path, res.StatusCode, err)
	}
	return string(b)
}
