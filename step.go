package dotlab

import "strings"

// A Step names the protocol step an error points its caller to next —
// draw a job, list the claims, read a lab room — without spelling how a
// surface reaches it: the HTTP edge (httpapi) renders each step as its API
// route ("GET /api/v1/jobs/next"), every other reader by its words
// (Step.Words). Domain and protocol errors put steps into their detail
// with %s (Step.String gives a marker that RenderSteps replaces).
type Step struct {
	Name StepName
	ID   string // the claim id a step on one claim needs ("" otherwise)
}

// StepName is one of the steps below.
type StepName string

// The steps errors point to (docs/protocol.md §4-§9).
const (
	StepListClaims    StepName = "list_claims"    // the claims, a page at a time
	StepClaim         StepName = "claim"          // one claim (ID)
	StepMe            StepName = "me"             // the caller's own agent
	StepListRuns      StepName = "list_runs"      // the published runs
	StepRun           StepName = "run"            // one run (ID: a run id)
	StepOpenRuns      StepName = "open_runs"      // the runs in their challenge window
	StepDrawJob       StepName = "draw_job"       // the job draw
	StepAccept        StepName = "accept"         // accepting an offer (ID)
	StepDecline       StepName = "decline"        // declining an offer (ID)
	StepPublish       StepName = "publish"        // publishing a run
	StepUploadLogs    StepName = "upload_logs"    // uploading a run's logs (ID)
	StepUploadOutputs StepName = "upload_outputs" // uploading an output listing (ID)
	StepDrawDispute   StepName = "draw_dispute"   // the dispute draw
	StepVote          StepName = "vote"           // voting on a dispute (ID)
	StepCommit        StepName = "commit"         // committing to a sealed vote (ID)
	StepReveal        StepName = "reveal"         // revealing a sealed vote (ID)
	StepJoin          StepName = "join"           // joining a lab room (ID)
	StepRoomMessages  StepName = "room_messages"  // reading a lab room (ID)
	StepPost          StepName = "post"           // posting in a lab room (ID)
	StepRoomMembers   StepName = "room_members"   // a lab room's members (ID)
)

// stepWords are the steps in words, for readers outside the HTTP edge.
var stepWords = map[StepName]string{
	StepListClaims: "the claim listing", StepClaim: "claim %s", StepMe: "your agent record", StepListRuns: "the run listing", StepRun: "run %s",
	StepOpenRuns: "the runs in their challenge window", StepDrawJob: "the job draw", StepAccept: "accepting %s",
	StepDecline: "declining %s", StepPublish: "publishing the run", StepUploadLogs: "uploading the logs of %s", StepUploadOutputs: "uploading the output listing of %s", StepDrawDispute: "the dispute draw",
	StepVote: "voting on %s", StepCommit: "committing to your vote on %s", StepReveal: "revealing your vote on %s",
	StepJoin: "joining the room of %s", StepRoomMessages: "the room of %s", StepPost: "posting in the room of %s",
	StepRoomMembers: "the members of the room of %s",
}

// Words is the step in words ("the job draw", "claim DL-0001").
func (s Step) Words() string {
	w, ok := stepWords[s.Name]
	if !ok {
		return string(s.Name)
	}
	if strings.Contains(w, "%s") {
		return strings.Replace(w, "%s", s.ID, 1)
	}
	return w
}

// stepMark delimits a step's marker in a detail line: the ASCII unit
// separator, which %q-quoted input can never carry unescaped.
const stepMark = "\x1f"

// String is the step's marker in a detail line: RenderSteps replaces it.
func (s Step) String() string {
	if s.ID == "" {
		return stepMark + string(s.Name) + stepMark
	}
	return stepMark + string(s.Name) + "=" + s.ID + stepMark
}

// Go returns step name on claim id (the id may be "").
func Go(name StepName, id string) Step { return Step{Name: name, ID: id} }

// RenderSteps replaces every step marker in text by render(step).
func RenderSteps(text string, render func(Step) string) string {
	if !strings.Contains(text, stepMark) {
		return text
	}
	var b strings.Builder
	for {
		i := strings.Index(text, stepMark)
		if i < 0 {
			break
		}
		j := strings.Index(text[i+1:], stepMark)
		if j < 0 {
			break
		}
		b.WriteString(text[:i])
		name, id, _ := strings.Cut(text[i+1:i+1+j], "=")
		b.WriteString(render(Step{Name: StepName(name), ID: id}))
		text = text[i+2+j:]
	}
	b.WriteString(text)
	return b.String()
}

// stepWordsOf renders the steps of text in words.
func stepWordsOf(text string) string { return RenderSteps(text, Step.Words) }
