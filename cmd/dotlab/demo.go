package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/agent"
	"github.com/dotlab/dotlab/client"
	"github.com/dotlab/dotlab/demo"
	"github.com/dotlab/dotlab/runner"
	"github.com/dotlab/dotlab/sandbox"
	"github.com/spf13/cobra"
)

// demoOptions configure `dotlab demo`.
type demoOptions struct {
	varDir, examplesDir, addr, archiveAddr string
	exit                                   bool
	challengeWindow                        time.Duration
}

// demoResult is one claim's end state, for the table and the tests.
type demoResult struct {
	Example  demo.Example
	Claim    *dotlab.Claim
	Run      *dotlab.Run
	Disputed bool
	Votes    []dotlab.Vote
	Challs   []*dotlab.Challenge
}

func newDemoCmd() *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run DotLab on real published claims end to end (the main job)",
		Long: `Start a server on SQLite, list the example claims of examples/claims (Student
1908, Fisher 1935, NIST Michelso, Bickel 1975, and two labelled
demonstrations: altered data and crashing code), register a submitter, two
runners, a challenger and three reviewers, and let them work through every
lifecycle path, including one dispute decided by votes. Prints the final
table and leaves the server running for a look (Ctrl-C stops it) unless
--exit.

Everything the demo writes lives under --var (default ./var). Needs root,
runc, git and debootstrap (the README's set-up command installs them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := runDemo(cmd.Context(), cmd.OutOrStdout(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.varDir, "var", "var", "directory for everything the demo writes")
	f.StringVar(&o.examplesDir, "examples", "examples", "the repository's examples directory")
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "server address")
	f.StringVar(&o.archiveAddr, "archive-addr", "127.0.0.1:8090", "address serving the examples' data and git repositories")
	f.BoolVar(&o.exit, "exit", false, "exit after the table instead of leaving the server running")
	f.DurationVar(&o.challengeWindow, "challenge-window", 45*time.Second, "challenge window of the demo server")
	return cmd
}

func runDemo(ctx context.Context, out io.Writer, o demoOptions) ([]demoResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return runDemoWithBinary(ctx, out, o, self)
}

// runDemoWithBinary is runDemo with the dotlab binary to call for `image
// build` given explicitly (tests build one; the command uses itself).
func runDemoWithBinary(ctx context.Context, out io.Writer, o demoOptions, self string) ([]demoResult, error) {
	logf := func(format string, args ...any) {
		fmt.Fprintf(out, "%s  %s\n", time.Now().Format(time.TimeOnly), fmt.Sprintf(format, args...))
	}
	varDir, err := filepath.Abs(o.varDir)
	if err != nil {
		return nil, err
	}
	logf("DotLab demo: everything it writes goes under %s", varDir)
	for _, d := range []string{"manifests", "archive", "runs"} {
		if err := os.MkdirAll(filepath.Join(varDir, d), 0o755); err != nil {
			return nil, err
		}
	}
	exs, err := demo.LoadExamples(o.examplesDir)
	if err != nil {
		return nil, err
	}
	if err := (sandbox.Runtime{Name: "runc"}).Check(); err != nil {
		return nil, fmt.Errorf("the sandbox is not usable here: %w (the README's set-up command installs runc; run as root)", err)
	}
	imageRef, pyVersion, err := demo.BuildImage(o.examplesDir, varDir, self, logf)
	if err != nil {
		return nil, err
	}
	logf("example image %s (python3.11-minimal %s)", imageRef, pyVersion)

	archive, err := demo.StartArchive(filepath.Join(varDir, "archive"), o.archiveAddr)
	if err != nil {
		return nil, err
	}
	defer archive.Close()
	manifests := map[string][]byte{}
	for _, ex := range exs {
		raw, err := archive.Prepare(o.examplesDir, ex, imageRef, pyVersion)
		if err != nil {
			return nil, err
		}
		manifests[ex.Dir] = raw
		if err := os.WriteFile(filepath.Join(varDir, "manifests", ex.Dir+".json"), raw, 0o644); err != nil {
			return nil, err
		}
		pinned := filepath.Join(o.examplesDir, "claims", ex.Dir, "manifest.json")
		if old, err := os.ReadFile(pinned); err != nil || string(old) != string(raw) {
			logf("note: %s differs from this machine's build (image digest, package version or archive address); using the re-pinned %s",
				pinned, filepath.Join(varDir, "manifests", ex.Dir+".json"))
		}
	}

	// A fresh server on SQLite. The example data and repositories are served
	// on loopback (127.0.0.1:8090) over plain http, so the demo's server lists
	// private URLs (--allow-private-urls) as its runners fetch them.
	dbPath := filepath.Join(varDir, "dotlab.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(dbPath + suffix)
	}
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	ready := make(chan string, 1)
	served := make(chan error, 1)
	w := dotlab.Windows{Accept: 5 * time.Minute, Publish: 15 * time.Minute, Challenge: o.challengeWindow, Quorum: 3}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		served <- serve(srvCtx, logger, o.addr, "sqlite:"+dbPath, w, serveOptions{settleEvery: 250 * time.Millisecond, allowPrivateURLs: true}, ready)
	}()
	var base string
	select {
	case a := <-ready:
		base = "http://" + a
	case err := <-served:
		return nil, err
	}
	logf("server %s (SQLite %s; challenge window %s)", base, dbPath, o.challengeWindow)

	pub, err := client.New(base, "")
	if err != nil {
		return nil, err
	}
	register := func(name string) (*client.Client, string, error) {
		a, err := pub.Register(ctx, dotlab.NewAgent{Name: name, Operator: "dotlab demo", Capabilities: []string{"python"}})
		if err != nil {
			return nil, "", err
		}
		return pub.WithKey(a.APIKey), a.ID, nil
	}
	submitter, _, err := register("lab-submitter")
	if err != nil {
		return nil, err
	}
	eng := func(name string) (*runner.Runner, error) {
		r, err := runner.New(filepath.Join(varDir, "cache"), sandbox.Runtime{Name: "runc"}, runner.Policy{AllowPrivate: true}, time.Now)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	newAgent := func(name string) (*agent.Agent, error) {
		c, _, err := register(name)
		if err != nil {
			return nil, err
		}
		e, err := eng(name)
		if err != nil {
			return nil, err
		}
		return &agent.Agent{Client: c, Engine: e, Capabilities: []string{"python"}, WorkDir: filepath.Join(varDir, "runs", name), Clock: time.Now,
			Logf: func(format string, args ...any) { logf("%-14s %s", name, fmt.Sprintf(format, args...)) }}, nil
	}
	var agents []*agent.Agent
	for _, name := range []string{"runner-ada", "runner-bo", "challenger-cy", "reviewer-di", "reviewer-ed", "reviewer-fa"} {
		a, err := newAgent(name)
		if err != nil {
			return nil, err
		}
		agents = append(agents, a)
	}
	ada, bo, cy, reviewers := agents[0], agents[1], agents[2], agents[3:]

	ids := map[string]string{}
	for _, ex := range exs {
		v, err := submitter.SubmitClaim(ctx, manifests[ex.Dir], ex.Field)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", ex.Dir, err)
		}
		ids[ex.Dir] = v.ID
		logf("listed %s  %s", v.ID, ex.Title)
	}

	// DEMONSTRATION of the dispute mechanism: runner-ada misreports one value
	// of the first reproduced/not_reproduced run it gets, flipping its
	// outcome. The challenger's independent rerun disagrees, and three
	// reviewers decide by rerunning. Real runners never do this.
	tampered := ""
	ada.BeforePublish = func(m *dotlab.Manifest, rec *runner.Record) {
		if tampered != "" || !rec.Body.Outcome.Compared() {
			return
		}
		tampered = m.Title
		misreport(m, rec)
		logf("%-14s DEMONSTRATION: misreports %s to stage a dispute (outcome now %s)", "runner-ada", rec.Body.Comparisons[0].Name, rec.Body.Outcome)
	}
	for tampered == "" {
		id, err := ada.RunOnce(ctx)
		if err != nil {
			return nil, err
		}
		if id == "" {
			break
		}
	}
	// Both runners and the challenger work until nothing is left.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	runnersDone := make(chan struct{})
	for _, r := range []*agent.Agent{ada, bo} {
		wg.Add(1)
		go func(r *agent.Agent) {
			defer wg.Done()
			for {
				id, err := r.RunOnce(ctx)
				if err != nil {
					errs <- err
					return
				}
				if id == "" {
					return
				}
			}
		}(r)
	}
	go func() { wg.Wait(); close(runnersDone) }()
	challenged := make(chan struct{})
	go func() {
		defer close(challenged)
		for {
			id, err := cy.ChallengeOnce(ctx)
			if err != nil {
				errs <- err
				return
			}
			if id != "" {
				continue
			}
			select {
			case <-runnersDone:
				// One more pass for runs published at the very end.
				for {
					if id, err := cy.ChallengeOnce(ctx); err != nil || id == "" {
						return
					}
				}
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	<-runnersDone
	<-challenged
	select {
	case err := <-errs:
		return nil, err
	default:
	}

	// Reviewers take the disputes.
	for {
		voted := false
		for _, r := range reviewers {
			d, err := r.Client.NextDispute(ctx)
			if errors.Is(err, client.ErrNone) {
				continue
			} else if err != nil {
				return nil, err
			}
			dec, err := r.DecideByRerun(ctx, d)
			if err != nil {
				return nil, err
			}
			if _, err := r.Client.Vote(ctx, d.ID, dotlab.VoteBody{Vote: dec.Vote, Rationale: dec.Rationale}); err != nil {
				return nil, err
			}
			r.Logf("voted %s on %s", dec.Vote, d.ID)
			voted = true
		}
		if !voted {
			break
		}
	}

	logf("waiting for the challenge windows to close and every claim to settle…")
	deadline := time.Now().Add(o.challengeWindow + 2*time.Minute)
	var results []demoResult
	for {
		results = results[:0]
		settled := true
		for _, ex := range exs {
			v, err := pub.Claim(ctx, ids[ex.Dir])
			if err != nil {
				return nil, err
			}
			settled = settled && v.State == dotlab.StateSettled
			results = append(results, demoResult{Example: ex, Claim: v.Claim})
		}
		if settled {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("not every claim settled in time")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	for i := range results {
		c := results[i].Claim
		if c.RunID != "" {
			if results[i].Run, err = pub.Run(ctx, c.RunID); err != nil {
				return nil, err
			}
		}
		if d, err := pub.Dispute(ctx, c.ID); err == nil {
			results[i].Disputed = true
			results[i].Votes = d.Votes
			results[i].Challs = d.Challenges
		} else if chs, err := pub.Challenges(ctx, c.ID); err == nil {
			results[i].Challs = chs
		}
	}
	verdicts := printDemoTable(out, base, results)
	if o.exit || verdicts != nil {
		return results, verdicts
	}
	fmt.Fprintf(out, "\nThe server keeps running at %s (API %s/api/v1). Ctrl-C stops it.\n", base, base)
	select {
	case <-ctx.Done():
	case err := <-served:
		return results, err
	}
	return results, nil
}

// misreport flips a record's outcome for the dispute demonstration: a
// reproduced run gets its first target moved far outside tolerance; a
// not_reproduced run gets every value set to the published one.
func misreport(m *dotlab.Manifest, rec *runner.Record) {
	values := map[string]dotlab.Decimal{}
	for i, c := range rec.Body.Comparisons {
		v := c.Rerun
		if rec.Body.Outcome == dotlab.OutcomeReproduced && i == 0 {
			v = dotlab.Decimal(fmt.Sprintf("%g", c.Rerun.Float64()*1.5+1))
		} else if rec.Body.Outcome == dotlab.OutcomeNotReproduced {
			for _, t := range m.Targets {
				if t.Name == c.Name {
					v = t.Value
				}
			}
		}
		rec.Body.Comparisons[i].Rerun = v
		values[c.Name] = v
	}
	comps, outcome, err := dotlab.Decide(m.Targets, values)
	if err == nil {
		rec.Comparisons, rec.Body.Outcome = comps, outcome
	}
}

// printDemoTable prints the final table; it returns an error when a claim
// settled with another verdict than its published numbers lead to.
func printDemoTable(out io.Writer, base string, results []demoResult) error {
	sort.Slice(results, func(i, j int) bool { return results[i].Claim.ID < results[j].Claim.ID })
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIM\tTITLE\tOUTCOME\tSTATE\tHOW IT SETTLED\tLAB ROOM")
	for _, r := range results {
		how := "settled at once"
		switch {
		case r.Disputed:
			runner, challenger := 0, 0
			for _, v := range r.Votes {
				if v.Vote == dotlab.VoteRunner {
					runner++
				} else {
					challenger++
				}
			}
			how = fmt.Sprintf("dispute: %d-%d for the %s", max(runner, challenger), min(runner, challenger), map[bool]string{true: "challenger", false: "runner"}[challenger > runner])
		case r.Run != nil && r.Run.Outcome.Compared():
			how = fmt.Sprintf("window closed, %d agreeing challenge(s)", len(r.Challs))
		}
		title := r.Example.Title
		if len(title) > 60 {
			title = title[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s/labs/%s\n", r.Claim.ID, title, r.Claim.Outcome, r.Claim.State, how, base, r.Claim.ID)
	}
	tw.Flush()
	var lines []string
	for _, r := range results {
		if r.Claim.Outcome != r.Example.Expect {
			lines = append(lines, fmt.Sprintf("%s: %s, expected %s", r.Claim.ID, r.Claim.Outcome, r.Example.Expect))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintf(out, "\nUNEXPECTED: %s\n", strings.Join(lines, "; "))
		return fmt.Errorf("unexpected verdicts: %s", strings.Join(lines, "; "))
	}
	fmt.Fprintln(out, "\nEvery claim settled with the verdict its published numbers lead to.")
	return nil
}
