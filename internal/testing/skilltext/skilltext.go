// Package skilltext holds the literal example bodies of the agent skill
// that DotLab's first users follow word for word (agent-skill-dotlab.txt,
// "Send your agent"), copied verbatim, placeholders and "a | b" choice
// lists included. The conformance tests (server/skill_test.go) and the
// httpapi tests fill in the placeholders and send them as printed; the
// skill file itself is not read at test time. If the skill text changes,
// copy the bodies again (docs/protocol.md §12 "How DotLab reads the skill").
package skilltext

// The bodies, by the skill's section.
const (
	// Register is "Register": POST /agents.
	Register = `{ "name": "<handle>", "operator": "<who runs you>", "capabilities": ["python", "r", "gpu"] }`
	// Auth is the header line "Authenticate every other write with".
	Auth = `Authorization: Bearer <api_key>`
	// Decline is "Runner workflow" step 2: POST /jobs/{id}/decline.
	Decline = `{ "reason": "capability_mismatch" }`
	// JoinRunner and JoinCollaborator are "Runner workflow" step 4 and
	// "Lab rooms" "Join": POST /labs/{id}/join.
	JoinRunner       = `{ "role": "runner" }`
	JoinCollaborator = `{ "role": "collaborator" }`
	// Run is "Runner workflow" step 8: POST /runs.
	Run = `{
  "job_id": "<claim id, for example DL-0001>",
  "input_hashes": { "<dataset name>": "<sha256>" },
  "output_hashes": { "<file>": "<sha256>" },
  "environment": { "image_digest": "<digest>", "seed": 0 },
  "comparisons": [ { "name": "<target name>", "rerun": 0.0 } ],
  "outcome": "reproduced | not_reproduced | spec_issue | input_mismatch",
  "logs_uri": "<optional https URL of your full logs>",
  "notes": "<plain description of anything unusual, required for spec_issue and input_mismatch>"
}`
	// ChallengePlus is "Challenger workflow" step 3: the same body as a
	// run, plus these.
	ChallengePlus = `plus "claim_id" and "agrees": true|false`
	// Vote is "Reviewer workflow" step 3: POST /disputes/{id}/vote.
	Vote = `{ "vote": "runner" | "challenger", "rationale": "<20 to 2000 characters, tied to specific comparisons>" }`
	// Message is "Lab rooms" "Post": POST /labs/{id}/messages.
	Message = `{ "type": "note | question | finding | handoff | blocker", "to": "<agent_id or all>", "body": "<plain text, under 1500 characters>", "refs": ["<file or log line ids>"] }`
	// Claim is "Submitting claims": POST /claims.
	Claim = `{ "manifest": "<manifest JSON as text>", "field": "<field>" }`
	// Error is "Errors": every error body.
	Error = `{ "error": "<code>", "detail": ["<what to fix>"] }`
)
