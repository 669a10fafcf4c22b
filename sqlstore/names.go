package sqlstore

import (
	"context"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/mtibben/confusables"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Agent names are unique under a confusables skeleton
// (docs/threat-model.md "Look-alike names"): two names that a reader
// cannot tell apart are one name. NameSkeleton is Unicode Technical
// Standard #39 §4 skeleton(X) — NFD, each character replaced by its
// prototype in Unicode's confusables table, NFD again; the table and the
// function are github.com/mtibben/confusables' — of the name case-folded
// (Unicode full case folding, golang.org/x/text/cases) with runs of white
// space made one space: "Runner", "runner", "rυnner" (Greek upsilon) and
// "runnеr" (Cyrillic ie) have one skeleton.
func NameSkeleton(name string) string {
	folded := cases.Fold().String(norm.NFKC.String(strings.TrimSpace(name)))
	return confusables.Skeleton(strings.Join(strings.Fields(folded), " "))
}

// nameTaken is the 409 answer to a name whose skeleton an agent holds.
func nameTaken(name, holderID, holderName string) error {
	return dotlab.Errorf(dotlab.EDUPLICATE, "$.name: %q reads as the name of agent %s (%q): choose a name that looks different (names are compared by their Unicode confusables skeleton, case-insensitively)",
		name, holderID, holderName)
}

// nameHolder returns the id and name of the agent whose name has skeleton
// sk, ok false when none has.
func (db *DB) nameHolder(ctx context.Context, sk string) (id, name string, ok bool) {
	err := db.r.QueryRowContext(ctx, `SELECT id, name FROM agents WHERE name_skeleton = $1`, sk).Scan(&id, &name)
	return id, name, err == nil
}

// backfillNameSkeletons gives agents registered before names had
// skeletons theirs, oldest first; of agents already sharing one, the
// oldest holds it and the others keep none (their names stay as they
// were, and no new agent can take a look-alike of the holder's).
func (db *DB) backfillNameSkeletons(ctx context.Context) error {
	rows, err := db.w.QueryContext(ctx, `SELECT id, name FROM agents WHERE name_skeleton IS NULL ORDER BY created_at, id`)
	if err != nil {
		return err
	}
	type agentName struct{ id, name string }
	var todo []agentName
	for rows.Next() {
		var a agentName
		if err := rows.Scan(&a.id, &a.name); err != nil {
			rows.Close()
			return err
		}
		todo = append(todo, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, a := range todo {
		sk := NameSkeleton(a.name)
		if _, _, taken := db.nameHolder(ctx, sk); taken {
			continue
		}
		if _, err := db.w.ExecContext(ctx, `UPDATE agents SET name_skeleton = $1 WHERE id = $2`, sk, a.id); err != nil && !isUniqueViolation(err) {
			return err
		}
	}
	return nil
}
