package mcpserver

import (
	"context"
	"errors"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/manifest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NoInput is the input of a tool that takes none.
type NoInput struct{}

// ClaimInput names one claim.
type ClaimInput struct {
	ClaimID string `json:"claim_id" jsonschema:"the claim id, e.g. DL-0001"`
}

// StatusOutput is the status tool's answer.
type StatusOutput struct {
	Server string `json:"server"`
	// The agent this server acts as (its key is never shown).
	AgentID      string   `json:"agent_id"`
	Name         string   `json:"name"`
	Capabilities []string `json:"capabilities" jsonschema:"registered capabilities"`
	Local        []string `json:"local_capabilities" jsonschema:"what this machine provides of them"`
	Standing     float64  `json:"standing"`
	// The API's GET /status.
	APIVersion      string          `json:"api_version"`
	ProtocolVersion string          `json:"protocol_version"`
	SpecVersions    []string        `json:"manifest_spec_versions"`
	Features        map[string]bool `json:"features" jsonschema:"which features are live; a false one does not exist: do not use it"`
}

// NextJobOutput is next_job's answer: a job, or none open (204).
type NextJobOutput struct {
	None bool     `json:"none" jsonschema:"true when nothing is open right now: try again later"`
	Job  *JobView `json:"job,omitempty"`
}

// ManifestOutput is get_manifest's answer: the pinned facts the rerun
// checks, then the manifest as submitted, as untrusted text.
type ManifestOutput struct {
	ClaimID     string        `json:"claim_id"`
	Title       Untrusted     `json:"title"`
	Requires    []string      `json:"requires"`
	Missing     []string      `json:"missing_capabilities" jsonschema:"required capabilities this machine lacks"`
	ImageDigest string        `json:"image_digest"`
	CodeCommit  string        `json:"code_commit,omitempty"`
	Datasets    []DatasetView `json:"datasets"`
	Targets     []TargetView  `json:"targets"`
	Manifest    Untrusted     `json:"manifest" jsonschema:"the manifest JSON exactly as submitted"`
}

// DatasetView is one pinned input.
type DatasetView struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// TargetView is one published value with its tolerance.
type TargetView struct {
	Name      string `json:"name"`
	Published string `json:"published"`
	Tolerance string `json:"tolerance" jsonschema:"absolute or relative, and its value"`
}

// SubmitInput is submit_claim's input.
type SubmitInput struct {
	Manifest string `json:"manifest" jsonschema:"the manifest JSON text (spec v0.1, resource dotlab://docs/manifest-spec)"`
	Field    string `json:"field" jsonschema:"the field of science, e.g. statistics"`
}

func (s *service) addJobTools(srv *mcp.Server) {
	add(srv, "status", "Status", "The server's GET /status (which features are live) and who this agent is: id, capabilities, standing. Call it first; a feature marked false does not exist.", true, s.status)
	add(srv, "next_job", "Draw the next job", "Runner step 1 (GET /jobs/next): draws a job at random from listed claims you hold no role on; you cannot choose the claim. none=true means nothing is open: try later. missing_capabilities lists what this machine lacks: then decline, else accept within the offer window."+untrustedNote, false, s.nextJob)
	add(srv, "accept_job", "Accept the job", "Runner step 2 (POST /jobs/{id}/accept): accept the job offered to you; publish within the publish deadline. Then get_manifest, lab_join as runner, rerun with purpose run, publish_run."+untrustedNote, false, s.accept)
	add(srv, "decline_job", "Decline (capability_mismatch)", "Runner step 2 (POST /jobs/{id}/decline with reason capability_mismatch, free of cost). Refused by the tool when this machine has every capability the claim requires: then accept it or let the offer expire."+untrustedNote, false, s.decline)
	add(srv, "get_manifest", "Get the manifest", "Runner step 3 (GET /claims/{id}/manifest): the pinned facts (image digest, datasets by SHA-256, code commit, targets with tolerances) and the manifest as submitted. Follow it exactly; never edit it. The rerun tool runs it; you never run claim code yourself."+untrustedNote, true, s.getManifest)
	add(srv, "get_claim", "Get a claim", "GET /claims/{id}: state, outcome, runner, run id, deadlines, the lab room's and the page's URLs."+untrustedNote, true, s.getClaim)
	add(srv, "submit_claim", "Submit a claim", "Submitter (POST /claims): list a claim from a manifest (spec v0.1). The tool validates it locally first, with the server's listing rules, and screens it for keys. A submitter cannot run its own claim.", false, s.submit)
}

func (s *service) status(ctx context.Context, _ *mcp.CallToolRequest, _ NoInput) (StatusOutput, error) {
	st, err := s.agent.Client.Status(ctx)
	if err != nil {
		return StatusOutput{}, err
	}
	me, err := s.agent.Client.Me(ctx)
	if err != nil {
		return StatusOutput{}, err
	}
	return StatusOutput{Server: s.server, AgentID: me.ID, Name: me.Name, Capabilities: orEmpty(me.Capabilities), Local: orEmpty(s.agent.Capabilities),
		Standing: me.Standing, APIVersion: st.Version, ProtocolVersion: st.ProtocolVersion, SpecVersions: orEmpty(st.SpecVersions), Features: nonNil(st.Features)}, nil
}

func nonNil(m map[string]bool) map[string]bool {
	if m == nil {
		return map[string]bool{}
	}
	return m
}

func (s *service) jobView(j *dotlab.Job) *JobView {
	return &JobView{ClaimID: j.ClaimID, State: string(j.State), Title: untrusted(j.Title), Requires: orEmpty(j.Requires),
		Missing: orEmpty(s.agent.Missing(j.Requires)), OfferExpiresAt: ptrTime(j.OfferExpiresAt), PublishDeadline: j.PublishDeadline, Reason: j.Reason}
}

func orEmpty(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

func (s *service) nextJob(ctx context.Context, _ *mcp.CallToolRequest, _ NoInput) (NextJobOutput, error) {
	j, err := s.agent.Client.NextJob(ctx)
	if errors.Is(err, client.ErrNone) {
		return NextJobOutput{None: true}, nil
	} else if err != nil {
		return NextJobOutput{}, err
	}
	if !dotlab.ValidClaimID(j.ClaimID) {
		return NextJobOutput{}, toolErrorf(EFAILED, "the server offered a job whose claim id is not one (DL-0001): refusing it")
	}
	return NextJobOutput{Job: s.jobView(j)}, nil
}

func (s *service) accept(ctx context.Context, _ *mcp.CallToolRequest, in ClaimInput) (JobView, error) {
	if err := claimID(in.ClaimID); err != nil {
		return JobView{}, err
	}
	j, err := s.agent.Client.Accept(ctx, in.ClaimID)
	if err != nil {
		return JobView{}, err
	}
	return *s.jobView(j), nil
}

// decline declines with capability_mismatch only when the claim really
// requires what this machine lacks (a decline with any other reason lowers
// standing, and an agent able to rerun the claim should).
func (s *service) decline(ctx context.Context, _ *mcp.CallToolRequest, in ClaimInput) (JobView, error) {
	if err := claimID(in.ClaimID); err != nil {
		return JobView{}, err
	}
	m, _, err := s.manifest(ctx, in.ClaimID)
	if err != nil {
		return JobView{}, err
	}
	if len(s.agent.Missing(m.Requires)) == 0 {
		return JobView{}, toolErrorf(ENOMISMATCH, "this machine has every capability "+in.ClaimID+" requires ("+strings.Join(orEmpty(m.Requires), ", ")+"): accept the job with accept_job, or let the offer expire; declining is only for capability_mismatch")
	}
	j, err := s.agent.Client.Decline(ctx, in.ClaimID, dotlab.DeclineCapabilityMismatch)
	if err != nil {
		return JobView{}, err
	}
	return *s.jobView(j), nil
}

// manifest fetches a claim's manifest as submitted and parses it.
func (s *service) manifest(ctx context.Context, id string) (*dotlab.Manifest, []byte, error) {
	raw, err := s.agent.Client.ClaimManifest(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Parse(raw)
	if err != nil {
		return nil, nil, toolErrorf(dotlab.EINVALID, append([]string{"the server's manifest of " + id + " does not validate here: report a spec_issue in the lab room"}, dotlab.ErrorDetail(err)...)...)
	}
	return m, raw, nil
}

func (s *service) getManifest(ctx context.Context, _ *mcp.CallToolRequest, in ClaimInput) (ManifestOutput, error) {
	if err := claimID(in.ClaimID); err != nil {
		return ManifestOutput{}, err
	}
	m, raw, err := s.manifest(ctx, in.ClaimID)
	if err != nil {
		return ManifestOutput{}, err
	}
	out := ManifestOutput{ClaimID: in.ClaimID, Title: Untrusted{Text: m.Title}, Requires: orEmpty(m.Requires), Missing: orEmpty(s.agent.Missing(m.Requires)),
		ImageDigest: m.Environment.ImageDigest(), CodeCommit: m.Code.Commit, Manifest: Untrusted{Text: string(raw)},
		Datasets: []DatasetView{}, Targets: []TargetView{}}
	for _, d := range m.Datasets {
		out.Datasets = append(out.Datasets, DatasetView{Name: d.Name, SHA256: d.SHA256})
	}
	for _, t := range m.Targets {
		out.Targets = append(out.Targets, TargetView{Name: t.Name, Published: string(t.Value), Tolerance: t.Tolerance.Type + " " + string(t.Tolerance.Value)})
	}
	return out, nil
}

func (s *service) getClaim(ctx context.Context, _ *mcp.CallToolRequest, in ClaimInput) (ClaimView, error) {
	if err := claimID(in.ClaimID); err != nil {
		return ClaimView{}, err
	}
	v, err := s.agent.Client.Claim(ctx, in.ClaimID)
	if err != nil {
		return ClaimView{}, err
	}
	return claimView(s.server, v), nil
}

// submit validates the manifest as `dotlab claim submit` does (the spec,
// then the server's listing rules), screens it and lists it.
func (s *service) submit(ctx context.Context, _ *mcp.CallToolRequest, in SubmitInput) (ClaimView, error) {
	if err := s.screen.check("manifest", in.Manifest); err != nil {
		return ClaimView{}, err
	}
	if err := s.screen.check("field", in.Field); err != nil {
		return ClaimView{}, err
	}
	m, err := manifest.Parse([]byte(in.Manifest))
	if err == nil {
		err = manifest.CheckListing(m, s.allowPrivate)
	}
	if err != nil {
		return ClaimView{}, toolErrorf(dotlab.EINVALID, append([]string{"the manifest does not pass the spec or the listing rules; nothing was submitted; fix each <JSON path> below"}, dotlab.ErrorDetail(err)...)...)
	}
	v, err := s.agent.Client.SubmitClaim(ctx, []byte(in.Manifest), trimmed(in.Field))
	if err != nil {
		return ClaimView{}, err
	}
	return claimView(s.server, v), nil
}
