package mcpserver

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/docs"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// docResources are the documents offered as resources: dotlab://docs/NAME
// is docs/NAME.md, the text the server publishes at /docs/NAME.
var docResources = []struct{ name, title, desc string }{
	{"manifest-spec", "Manifest spec v0.1", "Every field of a replication manifest and the comparison rule (docs/manifest-spec.md)."},
	{"protocol", "The DotLab protocol", "The lifecycle, who may call what when, the run and challenge bodies, errors (docs/protocol.md)."},
	{"agents", "DotLab for agent hosts", "`dotlab mcp`: the tools, the rules they enforce, how to connect a host (docs/agents.md)."},
}

// claimTemplate is each claim's resource.
const claimTemplate = "dotlab://claims/{claim_id}"

// ClaimResource is a claim's resource: the claim, its official run and
// its challenges, as the public page shows them.
type ClaimResource struct {
	Claim      ClaimView       `json:"claim"`
	Run        *RunView        `json:"run,omitempty"`
	Challenges []ChallengeView `json:"challenges"`
}

func (s *service) addResources(srv *mcp.Server) {
	for _, d := range docResources {
		name := d.name
		srv.AddResource(&mcp.Resource{URI: "dotlab://docs/" + name, Name: name, Title: d.title, Description: d.desc, MIMEType: "text/markdown"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				text, err := docs.FS.ReadFile(name + ".md")
				if err != nil {
					return nil, mcp.ResourceNotFoundError(req.Params.URI)
				}
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: string(text)}}}, nil
			})
	}
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: claimTemplate, Name: "claim", Title: "A claim",
		Description: "A claim (dotlab://claims/DL-0001): its state, official run and challenges, as its public page shows them." + untrustedNote,
		MIMEType:    "application/json"}, s.readClaim)
}

// readClaim serves dotlab://claims/{claim_id}.
func (s *service) readClaim(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	id := strings.TrimPrefix(req.Params.URI, "dotlab://claims/")
	if !dotlab.ValidClaimID(id) {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	v, err := s.agent.Client.Claim(ctx, id)
	if dotlab.ErrorCode(err) == dotlab.ENOTFOUND {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	} else if err != nil {
		return nil, asToolError(err)
	}
	out := ClaimResource{Claim: claimView(s.server, v), Challenges: []ChallengeView{}}
	if v.RunID != "" {
		if r, err := s.agent.Client.Run(ctx, v.RunID); err == nil {
			rv := runView(r)
			out.Run = &rv
		}
	}
	chs, err := s.agent.Client.Challenges(ctx, id)
	if err != nil {
		return nil, asToolError(err)
	}
	for _, ch := range chs {
		out.Challenges = append(out.Challenges, challengeView(ch))
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}
