package sqlstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/dotlab/dotlab"
)

// TestSealedConcurrentDrawsAndCommits (adversarial review): the five
// would-be reviewers draw the dispute at once, and every seated one
// commits at once. The committee never holds more than the quorum's
// seats (on PostgreSQL's read-committed pool too), every seat's commit
// applies exactly once, and a second commit by each is refused.
func TestSealedConcurrentDrawsAndCommits(t *testing.T) {
	forEachSealedWorld(t, func(t *testing.T, w *sealedWorld) {
		ctx := context.Background()
		var wg sync.WaitGroup
		seated := make([]bool, len(w.reviewers))
		for i, r := range w.reviewers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, found, err := w.p.NextDispute(ctx, r.ID)
				if err != nil {
					t.Errorf("reviewer %d draw: %v", i, err)
				}
				seated[i] = found && d.ID == w.id
			}()
		}
		wg.Wait()
		r, _, err := w.db.SealedRound(ctx, w.id)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range seated {
			if s {
				n++
			}
		}
		if len(r.Seats) != sealedWindows.Quorum || n != sealedWindows.Quorum {
			t.Fatalf("%d seats in the round, %d reviewers told they are seated; want %d", len(r.Seats), n, sealedWindows.Quorum)
		}
		// Each seated reviewer commits twice at once: one applies.
		var mu sync.Mutex
		ok := map[string]int{}
		for i, r := range w.reviewers {
			if !seated[i] {
				continue
			}
			for k := 0; k < 2; k++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := dotlab.VoteCommitment(w.id, r.ID, "runner", sealedRationale, strings.Repeat("0", 63)+string(rune('a'+k)))
					if _, err := w.p.CommitVote(ctx, r, w.id, dotlab.CommitBody{Commitment: c}); err == nil {
						mu.Lock()
						ok[r.ID]++
						mu.Unlock()
					} else if code := dotlab.ErrorCode(err); code != dotlab.ECONFLICT && code != dotlab.EWINDOWCLOSED {
						t.Errorf("reviewer %d commit: %v", i, err)
					}
				}()
			}
		}
		wg.Wait()
		for id, n := range ok {
			if n != 1 {
				t.Errorf("%s: %d commits applied, want 1", id, n)
			}
		}
		if len(ok) != sealedWindows.Quorum {
			t.Errorf("%d seats committed, want %d", len(ok), sealedWindows.Quorum)
		}
		r, _, err = w.db.SealedRound(ctx, w.id)
		if err != nil || r.Phase != dotlab.PhaseReveal {
			t.Errorf("after every seat committed: phase %q (%v), want reveal", r.Phase, err)
		}
	})
}
