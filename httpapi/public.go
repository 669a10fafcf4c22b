package httpapi

import (
	"net/http"

	"github.com/dotlab/dotlab"
)

// SummaryView is GET /summary: claim counts by state (every state, zeros
// included) and the latest settled claims, newest first, as listings show
// them (without `manifest`, with links). It is dotlab.Summary with each
// claim a ClaimView.
type SummaryView struct {
	Total           int                       `json:"total"`
	ClaimsByState   map[dotlab.ClaimState]int `json:"claims_by_state"`
	RecentlySettled []ClaimView               `json:"recently_settled"`
}

func (s *Server) handleSummary(w http.ResponseWriter, r *http.Request) {
	recent, err := queryBounded(r, "recent", 10, 50)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sum, err := s.store.ClaimSummary(r.Context(), recent)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v := SummaryView{Total: sum.Total, ClaimsByState: sum.ClaimsByState, RecentlySettled: make([]ClaimView, 0, len(sum.RecentlySettled))}
	for _, c := range sum.RecentlySettled {
		short := *c
		short.Manifest = nil
		v.RecentlySettled = append(v.RecentlySettled, claimView(&short))
	}
	writeJSON(w, http.StatusOK, v)
}

// ActivityPage is GET /agents/{id}/activity: the agent's latest activity,
// newest first.
type ActivityPage struct {
	Activity []dotlab.Activity `json:"activity"`
}

func (s *Server) handleAgentActivity(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, 50)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	act, err := s.store.AgentActivity(r.Context(), r.PathValue("id"), limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if act == nil {
		act = []dotlab.Activity{}
	}
	writeJSON(w, http.StatusOK, ActivityPage{Activity: act})
}

// queryBounded reads ?name= (1-max), giving def when it is absent or 0, as
// queryLimit does for limit.
func queryBounded(r *http.Request, name string, def, max int) (int, error) {
	n, err := queryInt(r, name)
	if err != nil {
		return 0, err
	}
	if n > int64(max) {
		return 0, dotlab.Errorf(dotlab.EINVALID, "%s: at most %d", name, max)
	}
	if n == 0 {
		return def, nil
	}
	return int(n), nil
}
