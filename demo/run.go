package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/manifest"
	"github.com/dotlab/dotlab/sandbox"
	"github.com/dotlab/dotlab/server"
)

// Options configure Run (the flags of `dotlab demo`).
type Options struct {
	VarDir string // everything the demo writes goes here
	// ImagesVar is where the example images are built and stored (the
	// recipes' rootfs cache under images/, the image store and the agents'
	// download cache under cache/). Default VarDir; the tests share one
	// with the image recipes' tests.
	ImagesVar   string
	ExamplesDir string // the repository's examples directory
	Addr        string // the demo server's address
	ArchiveAddr string // address serving the examples' data and git repositories
	// Exit returns after the table instead of leaving the server running
	// until ctx ends.
	Exit            bool
	ChallengeWindow time.Duration // the demo server's challenge window
	// Binary is the dotlab binary called for `dotlab image build` (the
	// command passes itself; tests build one).
	Binary  string
	Version string       // the server's reported version
	Out     io.Writer    // progress lines and the final table
	Clock   dotlab.Clock // default dotlab.SystemClock
}

// Result is one claim's end state, for the table and the tests.
type Result struct {
	Example  Example
	Claim    *dotlab.Claim
	Run      *dotlab.Run
	Disputed bool
	Votes    []dotlab.Vote
	Challs   []*dotlab.Challenge
}

// session is one run of the demo.
type session struct {
	o         Options
	varDir    string
	imagesVar string // Options.ImagesVar, absolute
	exs       []Example
	manifests map[string][]byte // by Example.Dir
	ids       map[string]string // claim id by Example.Dir
	base      string            // the server's base URL
	pub       *client.Client    // unauthenticated
}

func (s *session) logf(format string, args ...any) {
	fmt.Fprintf(s.o.Out, "%s  %s\n", s.o.Clock.Now().Local().Format(time.TimeOnly), fmt.Sprintf(format, args...))
}

// Run prepares the example claims, starts a server on SQLite, lists the
// claims, lets a cast of agents (cast.go) work through every lifecycle path
// and prints the final table (PrintTable). Without o.Exit the server keeps
// running until ctx ends. Needs root, runc, git and debootstrap.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Clock == nil {
		o.Clock = dotlab.SystemClock{}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	s := &session{o: o, manifests: map[string][]byte{}, ids: map[string]string{}}
	closeArchive, err := s.prepare()
	if err != nil {
		return nil, err
	}
	defer closeArchive()
	srv, err := s.startServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	c, err := s.newCast(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.list(ctx, c.submitter); err != nil {
		return nil, err
	}
	if err := s.work(ctx, c); err != nil {
		return nil, err
	}
	results, err := s.results(ctx)
	if err != nil {
		return nil, err
	}
	verdicts := PrintTable(o.Out, s.base, results)
	if o.Exit || verdicts != nil {
		fmt.Fprintf(o.Out, "\nThe demo has exited: its server and the archive on %s are gone, so a hand rerun of %s now fails with connection refused; run the demo without --exit to rerun its manifests by hand.\n",
			o.ArchiveAddr, filepath.Join(s.varDir, "manifests"))
		return results, verdicts
	}
	fmt.Fprintf(o.Out, "\nThe server keeps running at %s (API %s/api/v1). Ctrl-C stops it.\n", s.base, s.base)
	select {
	case <-ctx.Done():
		return results, nil
	case <-srv.done:
		return results, srv.err
	}
}

// prepare makes the var dir, checks the sandbox, builds the example image
// and pins every example's manifest against the archive it starts.
func (s *session) prepare() (closeArchive func() error, err error) {
	if s.varDir, err = filepath.Abs(s.o.VarDir); err != nil {
		return nil, err
	}
	s.imagesVar = s.varDir
	if s.o.ImagesVar != "" {
		if s.imagesVar, err = filepath.Abs(s.o.ImagesVar); err != nil {
			return nil, err
		}
	}
	s.logf("DotLab demo: everything it writes goes under %s", s.varDir)
	for _, d := range []string{"manifests", "archive", "runs"} {
		if err := os.MkdirAll(filepath.Join(s.varDir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if s.exs, err = LoadExamples(s.o.ExamplesDir); err != nil {
		return nil, err
	}
	if err := (sandbox.Runtime{Name: "runc"}).Check(); err != nil {
		return nil, fmt.Errorf("the sandbox is not usable here: %w (the README's set-up command installs runc; run as root)", err)
	}
	images := map[string]Image{}
	for _, recipe := range s.recipes() {
		img, err := BuildImage(s.o.ExamplesDir, s.imagesVar, s.o.Binary, recipe, s.logf)
		if err != nil {
			return nil, err
		}
		images[recipe] = img
		s.logf("example image %s (build output in %s)", img.Ref, img.Log)
	}
	archive, err := StartArchive(filepath.Join(s.varDir, "archive"), s.o.ArchiveAddr)
	if err != nil {
		return nil, err
	}
	if err := s.pin(archive, images); err != nil {
		archive.Close()
		return nil, err
	}
	return archive.Close, nil
}

// recipes lists the examples/images recipes the examples run in: "python"
// for the claims written for DotLab, and the recipe each package-shaped
// example's own manifest names (an unreadable one is reported by pin).
func (s *session) recipes() []string {
	seen := map[string]bool{}
	var out []string
	add := func(r string) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, ex := range s.exs {
		if ex.Manifest == "" {
			add("python")
			continue
		}
		raw, err := os.ReadFile(filepath.Join(s.o.ExamplesDir, "claims", ex.Dir, ex.Manifest))
		if err != nil {
			continue
		}
		var m struct {
			Environment struct {
				Image string `json:"image"`
			} `json:"environment"`
		}
		if json.Unmarshal(raw, &m) == nil {
			if r, ok := recipeOf(m.Environment.Image); ok {
				add(r)
			}
		}
	}
	return out
}

// pin writes each example's manifest, pinned to this machine's images and
// archive, to <var>/manifests, noting where it differs from the committed one.
func (s *session) pin(archive *Archive, images map[string]Image) error {
	for i, ex := range s.exs {
		raw, err := archive.Prepare(s.o.ExamplesDir, ex, images)
		if err != nil {
			return err
		}
		if ex.Title == "" {
			var m dotlab.Manifest
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			s.exs[i].Title = m.Title
		}
		s.manifests[ex.Dir] = raw
		out := filepath.Join(s.varDir, "manifests", ex.Dir+".json")
		if err := os.WriteFile(out, raw, 0o644); err != nil {
			return err
		}
		pinned := filepath.Join(s.o.ExamplesDir, "claims", ex.Dir, "manifest.json")
		if !sameIdentity(pinned, raw) {
			s.logf("note: %s differs from this machine's build (image digest, package version or archive address); using the re-pinned %s", pinned, out)
		}
	}
	return nil
}

// running is the demo's server.
type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the server has stopped
	err    error         // why it stopped, once done is closed
}

// stop shuts the server down and waits for it.
func (r *running) stop() { r.cancel(); <-r.done }

// startServer starts a fresh server on SQLite under the var dir. The example
// data and repositories are served on loopback over plain http, so the
// server lists private URLs (AllowPrivateURLs) as its runners fetch them.
func (s *session) startServer(ctx context.Context) (*running, error) {
	dbPath := filepath.Join(s.varDir, "dotlab.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(dbPath + suffix)
	}
	srvCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &running{cancel: cancel, done: make(chan struct{})}
	ready := make(chan string, 1)
	cfg := server.Config{Addr: s.o.Addr, DB: "sqlite:" + dbPath, SettleEvery: 250 * time.Millisecond, AllowPrivateURLs: true,
		Windows: dotlab.Windows{Accept: 5 * time.Minute, Publish: 15 * time.Minute, Challenge: s.o.ChallengeWindow, Quorum: 3},
		Version: s.o.Version, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: s.o.Clock, Ready: ready}
	go func() { defer close(r.done); r.err = server.Run(srvCtx, cfg) }()
	select {
	case addr := <-ready:
		s.base = "http://" + addr
	case <-r.done:
		return nil, r.err
	}
	s.logf("server %s (SQLite %s; challenge window %s)", s.base, dbPath, s.o.ChallengeWindow)
	var err error
	if s.pub, err = client.New(s.base, ""); err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

// list submits every example claim.
func (s *session) list(ctx context.Context, submitter *client.Client) error {
	for _, ex := range s.exs {
		v, err := submitter.SubmitClaim(ctx, s.manifests[ex.Dir], ex.Field)
		if err != nil {
			return fmt.Errorf("listing %s: %w", ex.Dir, err)
		}
		s.ids[ex.Dir] = v.ID
		s.logf("listed %s  %s", v.ID, ex.Title)
	}
	return nil
}

// results waits for every claim to settle (the challenge windows close),
// then collects each claim's run, dispute and challenges.
func (s *session) results(ctx context.Context) ([]Result, error) {
	s.logf("waiting for the challenge windows to close and every claim to settle…")
	deadline := s.o.Clock.Now().Add(s.o.ChallengeWindow + 2*time.Minute)
	var results []Result
	for {
		results = results[:0]
		settled := true
		for _, ex := range s.exs {
			v, err := s.pub.Claim(ctx, s.ids[ex.Dir])
			if err != nil {
				return nil, err
			}
			settled = settled && v.State == dotlab.StateSettled
			results = append(results, Result{Example: ex, Claim: v.Claim})
		}
		if settled {
			break
		}
		if s.o.Clock.Now().After(deadline) {
			return nil, errors.New("not every claim settled in time")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	for i := range results {
		if err := s.evidence(ctx, &results[i]); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// evidence fills in a settled claim's run, dispute votes and challenges.
func (s *session) evidence(ctx context.Context, r *Result) error {
	var err error
	if r.Claim.RunID != "" {
		if r.Run, err = s.pub.Run(ctx, r.Claim.RunID); err != nil {
			return err
		}
	}
	if d, err := s.pub.Dispute(ctx, r.Claim.ID); err == nil {
		r.Disputed, r.Votes, r.Challs = true, d.Votes, d.Challenges
	} else if chs, err := s.pub.Challenges(ctx, r.Claim.ID); err == nil {
		r.Challs = chs
	}
	return nil
}

// sameIdentity says whether the manifest file at path has the identity
// (docs/manifest-spec.md §5, RFC 8785) of raw: the same pins, whatever the
// formatting.
func sameIdentity(path string, raw []byte) bool {
	old, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	a, errA := manifest.Hash(old)
	b, errB := manifest.Hash(raw)
	return errA == nil && errB == nil && a == b
}
