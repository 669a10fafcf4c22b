package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/protocol"
	"github.com/dotlab/dotlab/strictjson"
)

// readBody reads a JSON body strictly into v: 413 too_large over the size
// limit; 422 invalid for malformed JSON, unknown fields (named by path) or
// wrong types.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) error {
	_, err := s.readRawBody(w, r, v)
	return err
}

// readOptionalBody is readBody for a body that may be left out: an empty
// (or all-whitespace) body leaves v as it is; the body limit is lowered
// to limit bytes (readBodyAtMost).
func (s *Server) readOptionalBody(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	data, err := s.readLimited(w, r, min(limit, s.maxBody))
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return err
	}
	return s.decode(data, v)
}

// readRawBody is readBody that also returns the body's bytes as sent.
func (s *Server) readRawBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	data, err := s.readAll(w, r)
	if err != nil {
		return nil, err
	}
	if err := s.decode(data, v); err != nil {
		return nil, err
	}
	return data, nil
}

// Smaller body limits of the routes whose bodies are small by nature, so
// that parsing what they are sent costs little (docs/protocol.md §11): a
// registration (anonymous) and a vote (a rationale of at most 2,000
// characters, signed or not).
// A lab message (1,499 characters and 50 refs of at most 500, JSON-escaped
// at worst) and a decline (a reason of at most 2,000 bytes) are small too.
const (
	maxAgentBody   = 16 << 10
	maxVoteBody    = 64 << 10
	maxMessageBody = 256 << 10
	maxDeclineBody = 16 << 10
)

// readBodyAtMost is readBody with the body limit lowered to limit bytes
// (never raised above the server's): 413 too_large over it.
func (s *Server) readBodyAtMost(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	data, err := s.readLimited(w, r, min(limit, s.maxBody))
	if err != nil {
		return err
	}
	return s.decode(data, v)
}

// readAll reads the request body: 413 too_large over the size limit.
func (s *Server) readAll(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return s.readLimited(w, r, s.maxBody)
}

func (s *Server) readLimited(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, dotlab.Errorf(dotlab.ETOOLARGE, "request body is over this route's limit of %d bytes", limit)
		}
		return nil, dotlab.Errorf(dotlab.EINVALID, "could not read the request body")
	}
	return data, nil
}

// formChecker is a request body whose checks need no database: Problems
// lists every problem they find, each as "path: what to fix".
type formChecker interface{ Problems() dotlab.Problems }

// decode parses data strictly into v: 422 invalid for malformed JSON,
// unknown fields (named by path) or wrong types. When v is a formChecker
// and the JSON has such problems, its checks run too, on what decoded, so
// that one 422 names every problem of the body found without the database
// (docs/protocol.md §5 "Errors").
func (s *Server) decode(data []byte, v any) error {
	var check func() dotlab.Problems
	if c, ok := v.(formChecker); ok {
		check = c.Problems
	}
	return s.decodeChecked(data, v, check)
}

// decodeChecked is decode with check (nil: none) as the body's checks:
// when the JSON has problems (strictjson.DecodeRest), those, then those
// check finds in the rest that decoded at paths the JSON's problems did
// not name, all in one 422. A body that decodes is left to the protocol
// step, which runs the same checks first (and, for a run, adds the
// manifest's: protocol.Service.PublishRun).
func (s *Server) decodeChecked(data []byte, v any, check func() dotlab.Problems) error {
	lim := strictjson.DefaultLimits
	lim.MaxBytes = int(s.maxBody)
	rest, err := strictjson.DecodeRest(data, lim, v)
	var probs dotlab.Problems
	if err != nil {
		var pe *strictjson.ProblemsError
		if !errors.As(err, &pe) {
			return dotlab.Errorf(dotlab.EINVALID, "$: %v", err)
		}
		probs = pe.Problems
	}
	if len(probs) > 0 && check != nil && rest {
		probs = mergeProblems(probs, check())
	}
	return probs.Err()
}

// mergeProblems appends to probs each of more whose path (before ": ") is
// not at or under a path probs names already.
func mergeProblems(probs, more dotlab.Problems) dotlab.Problems {
	named := make([]string, 0, len(probs))
	for _, p := range probs {
		path, _, _ := strings.Cut(p, ": ")
		named = append(named, path)
	}
	out := probs
	for _, m := range more {
		path, _, _ := strings.Cut(m, ": ")
		if !slices.ContainsFunc(named, func(n string) bool { return underPath(path, n) }) {
			out = append(out, m)
		}
	}
	return out
}

// underPath reports whether JSON path p is at or under path n.
func underPath(p, n string) bool {
	return p == n || strings.HasPrefix(p, n) && (p[len(n)] == '.' || p[len(n)] == '[')
}

// checkText rejects public text fields (path → text) that look like keys or
// tokens; everything a client sends that others can read goes through it.
// A field over its protocol step's size bound (protocol.CheckTextSizes) is refused first, unscreened.
func (s *Server) checkText(fields map[string]string) error {
	if err := protocol.CheckTextSizes(fields); err != nil {
		return err
	}
	for _, path := range dotlab.SortedKeys(fields) {
		if text := fields[path]; text != "" {
			if err := s.leaks.Check(path, text); err != nil {
				return err
			}
		}
	}
	return nil
}

// queryInt reads a non-negative integer ?name= (0 when absent).
func queryInt(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, dotlab.Errorf(dotlab.EINVALID, "%s: %q must be a non-negative integer", name, v)
	}
	return n, nil
}

// queryLimit reads ?limit= (1-200), giving def when it is absent or 0
// (docs/protocol.md §10).
func queryLimit(r *http.Request, def int) (int, error) {
	n, err := queryInt(r, "limit")
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return def, nil
	}
	p, _, err := dotlab.Page{Limit: int(min(n, 1<<30))}.Check("") // the paging rule's limit
	return p.Limit, err
}

// queryPage reads one page of a listing in claim order: ?limit=, ?after=
// and the state filter ?stateParam= (dotlab.Page.Check holds them to the
// paging rule).
func queryPage(r *http.Request, stateParam string) (dotlab.Page, error) {
	limit, err := queryLimit(r, dotlab.DefaultPageLimit)
	if err != nil {
		return dotlab.Page{}, err
	}
	q := r.URL.Query()
	p, _, err := dotlab.Page{State: dotlab.ClaimState(q.Get(stateParam)), After: q.Get("after"), Limit: limit}.Check(stateParam)
	return p, err
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
