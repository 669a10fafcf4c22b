package httpapi

import (
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/apiv1"
)

// stepRoutes are the API routes of the protocol steps errors point to
// (dotlab.Step): the route hints are added here, at the HTTP edge, and
// nowhere else. "{id}" takes the step's id.
var stepRoutes = map[dotlab.StepName]string{
	dotlab.StepListClaims:    "GET /api/v1/claims",
	dotlab.StepClaim:         "GET /api/v1/claims/{id}",
	dotlab.StepMe:            "GET /api/v1/agents/me",
	dotlab.StepListRuns:      "GET /api/v1/runs",
	dotlab.StepRun:           "GET /api/v1/runs/{id}",
	dotlab.StepOpenRuns:      "GET /api/v1/runs?status=challenge_window",
	dotlab.StepDrawJob:       "GET /api/v1/jobs/next",
	dotlab.StepAccept:        "POST /api/v1/jobs/{id}/accept",
	dotlab.StepDecline:       "POST /api/v1/jobs/{id}/decline",
	dotlab.StepPublish:       "POST /api/v1/runs",
	dotlab.StepUploadLogs:    "PUT /api/v1/jobs/{id}/logs",
	dotlab.StepUploadOutputs: "PUT /api/v1/jobs/{id}/outputs",
	dotlab.StepDrawDispute:   "GET /api/v1/disputes/next",
	dotlab.StepVote:          "POST /api/v1/disputes/{id}/vote",
	dotlab.StepCommit:        "POST /api/v1/disputes/{id}/commit",
	dotlab.StepReveal:        "POST /api/v1/disputes/{id}/reveal",
	dotlab.StepJoin:          "POST /api/v1/labs/{id}/join",
	dotlab.StepRoomMessages:  "GET /api/v1/labs/{id}/messages",
	dotlab.StepPost:          "POST /api/v1/labs/{id}/messages",
	dotlab.StepRoomMembers:   "GET /api/v1/labs/{id}/members",
}

// stepRoute renders step s as its API route ("GET /api/v1/jobs/next"), or
// in words when the API has no route for it.
func stepRoute(s dotlab.Step) string {
	r, ok := stepRoutes[s.Name]
	if !ok {
		return s.Words()
	}
	return strings.Replace(r, "{id}", s.ID, 1)
}

// routeHints renders the steps of detail lines as routes.
func routeHints(detail []string) []string {
	out := make([]string, len(detail))
	for i, d := range detail {
		out[i] = dotlab.RenderSteps(d, stepRoute)
	}
	return out
}

// linkJob fills a job's manifest_url (the wire's link to what to rerun).
func linkJob(j *dotlab.Job) *dotlab.Job {
	if j != nil {
		j.ManifestURL = apiv1.ManifestURL(j.ClaimID)
	}
	return j
}

// linkRuns fills the links of listed runs: the manifest and the full run.
func linkRuns(rs []*dotlab.RunListing) []*dotlab.RunListing {
	for _, r := range rs {
		r.ManifestURL, r.RunURL = apiv1.ManifestURL(r.ClaimID), apiv1.RunURL(r.ID)
	}
	return rs
}
