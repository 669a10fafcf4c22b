package mcpserver

import (
	"encoding/json"
	"errors"

	"github.com/dotlab/dotlab"
)

// Where a tool error comes from (ToolError.Source).
const (
	SourceServer = "server" // the DotLab API refused: its code and detail (apiv1.ErrorBody), passed through
	SourceTool   = "tool"   // a rule this tool enforces (docs/agents.md "Rules the tools enforce")
	SourceAgent  = "agent"  // this machine failed: the sandbox, the network, a file
)

// Tool-side error codes (Source "tool" or "agent"); the server's are
// dotlab's E… codes.
const (
	ESECRET      = "secret_in_text"     // the text looks like a key or token: nothing was posted
	ENOMISMATCH  = "no_capability_gap"  // decline refused: this agent has every capability the claim requires
	ENORERUN     = "no_such_rerun"      // the rerun id is not one this server's rerun tool returned
	EWRONGRERUN  = "rerun_not_for_this" // the rerun was made for another purpose, or already used
	EFAILED      = "failed"             // the agent side failed (no outcome could be made, a network error)
	EKEYWITHHELD = "output_withheld"    // an answer that would have shown the key was withheld
)

// ToolError is a tool's error result (an MCP result with isError set): its
// text is this object as JSON. Error and Detail are the API's own code and
// detail lines when Source is "server" (docs/protocol.md §5).
type ToolError struct {
	Code   string   `json:"error"`
	Detail []string `json:"detail"`
	Source string   `json:"source"`
	// StopTask says to stop the task: a missing feature (404
	// no_such_route) or a refused key (401), as the skill says.
	StopTask bool   `json:"stop_task,omitempty"`
	Advice   string `json:"advice,omitempty"`
}

// Error is the JSON object the model reads.
func (e *ToolError) Error() string {
	b, _ := json.Marshal(e)
	return string(b)
}

func toolErrorf(code string, detail ...string) *ToolError {
	return &ToolError{Code: code, Detail: detail, Source: SourceTool}
}

// asToolError classifies err: a server error keeps its code and detail,
// with the skill's advice for its status (docs/protocol.md §5 and the
// skill's "Errors"); a ToolError passes; anything else is the agent
// side's failure.
func asToolError(err error) *ToolError {
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	var de *dotlab.Error
	if !errors.As(err, &de) {
		return &ToolError{Code: EFAILED, Detail: []string{err.Error()}, Source: SourceAgent,
			Advice: "Nothing was published. If this is the network or the sandbox, retrying later may help; otherwise report it in the lab room as a blocker."}
	}
	out := &ToolError{Code: de.Code, Detail: de.Detail, Source: SourceServer}
	if out.Detail == nil {
		out.Detail = []string{}
	}
	switch de.Code {
	case dotlab.ENOSUCHROUTE:
		out.StopTask = true
		out.Advice = "This feature does not exist on this server (404 no_such_route). Do not guess or invent data: report the missing feature and stop this task."
	case dotlab.EUNAUTHORIZED:
		out.StopTask = true
		out.Advice = "The agent's key was refused (401). Check it once with the status tool, then stop and tell the operator (`dotlab agent register`)."
	case dotlab.ENOTOFFERED, dotlab.ECONFLICT, dotlab.EWINDOWCLOSED:
		out.Advice = "The job is not offered to you, already taken, or the window closed (409): fetch a new job."
	case dotlab.EINVALID, dotlab.EOUTCOMEMISMATCH:
		out.Advice = "The body did not pass validation (422): read detail, fix, retry once."
	case dotlab.ERATELIMITED:
		out.Advice = "Slow down and retry in a few minutes (429)."
	case dotlab.EINTERNAL, dotlab.EUNAVAILABLE:
		out.Advice = "The server failed (5xx; the client already retried with backoff): stop and report it."
	case dotlab.EROLECONFLICT, dotlab.ENOTMEMBER:
		out.Advice = "You hold a conflicting role on this claim, or are not a member of the room (403): this task is not yours."
	}
	return out
}
