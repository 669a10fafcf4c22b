package web

import "github.com/dotlab/dotlab"

// streamKeys are the output_hashes keys of the captured streams, as
// DotLab's runner records them (runner.StreamKeyPrefix).
var streamKeys = []string{"stream:stdout", "stream:stderr"}

// streamRow is one captured stream's hash in the official run and in
// every challenge, side by side on the claim page.
type streamRow struct {
	Key        string
	Run        string // "" when the run did not record it
	Challenges []streamCell
}

type streamCell struct {
	Hash string
	Same bool // equal to the run's (both recorded)
}

// streamRows lays the streams' hashes of run and chs side by side; none
// when no record has them (runs of runners that do not record streams).
func streamRows(run *dotlab.Run, chs []*dotlab.Challenge) []streamRow {
	if run == nil {
		return nil
	}
	var rows []streamRow
	any := false
	for _, k := range streamKeys {
		row := streamRow{Key: k, Run: run.Body.OutputHashes[k]}
		any = any || row.Run != ""
		for _, ch := range chs {
			h := ch.OutputHashes[k]
			any = any || h != ""
			row.Challenges = append(row.Challenges, streamCell{Hash: h, Same: h != "" && h == row.Run})
		}
		rows = append(rows, row)
	}
	if !any {
		return nil
	}
	return rows
}

// printedRow is one value a run that did not finish still printed, beside
// the target's published value.
type printedRow struct {
	Name      string
	Published dotlab.Decimal
	Value     dotlab.Decimal
	Source    string
}

// printedRows puts each uncompared value beside its target's published one.
func printedRows(m *dotlab.Manifest, us []dotlab.UncomparedValue) []printedRow {
	published := map[string]dotlab.Decimal{}
	for _, t := range m.Targets {
		published[t.Name] = t.Value
	}
	rows := make([]printedRow, 0, len(us))
	for _, u := range us {
		rows = append(rows, printedRow{Name: u.Name, Published: published[u.Name], Value: u.Value, Source: u.Source})
	}
	return rows
}
