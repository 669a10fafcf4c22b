package web

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/dotlab/dotlab"
)

// The targets plot on a claim page: one row per target, each on its own
// linear scale, with the published value as a tick, its tolerance band
// (published ± allowed) as a box, the official run's rerun as a filled
// circle and each challenger's as a hollow diamond. Positions are computed
// exactly on the decimals (big.Rat), so huge (1e308), tiny (1e-300) and
// negative values and a zero tolerance place correctly; only the final
// offset in px is a float. Labels print each number's Display text (exact
// when it is at most 24 characters long).

// Plot geometry, in SVG user units (the picture scales to its box).
const (
	plotWidth   = 720.0
	plotLeft    = 16.0
	plotRight   = 16.0
	plotTop     = 34.0 // below the legend
	rowBase     = 58.0 // a row's height before its value lines
	valueLine   = 16.0
	valueColumn = 232.0
	valuesPer   = 3 // value labels per line
	minBand     = 2.0
)

// plot is the picture's data (template "plot" in claim.html).
type plot struct {
	Width, Height float64
	Rows          []plotRow
	Desc          string // the whole picture as text
}

// plotRow is one target: its caption, the band, the published tick, the
// reruns' marks and their value labels.
type plotRow struct {
	Name, Caption string
	CaptionY      float64
	AxisY, BandY  float64
	TickTop       float64 // the published value's bar
	TickBottom    float64
	BandX, BandW  float64
	PubX          float64
	Marks         []plotMark
}

// plotMark is one rerun value: where it is and its label.
type plotMark struct {
	X          float64 // on the axis; negative for a value that is not a number (label only)
	Challenger int     // 0 for the official run, else the challenge's number
	Diamond    string  // a challenger's mark, as SVG path data
	Text       string
	LX, LY     float64 // where its label is
}

// targetPlot lays out rows (targetRows' result) as a plot, nil without
// targets.
func targetPlot(rows []targetRow) *plot {
	if len(rows) == 0 {
		return nil
	}
	p := &plot{Width: plotWidth}
	y := plotTop
	var desc []string
	for _, row := range rows {
		pr, text := plotTarget(row, y)
		p.Rows = append(p.Rows, pr)
		desc = append(desc, text)
		y += rowBase + valueLine*float64((len(pr.Marks)+valuesPer-1)/valuesPer)
	}
	p.Height = y
	p.Desc = strings.Join(desc, " ")
	return p
}

// plotTarget lays out one target's row at y and says it as text.
func plotTarget(row targetRow, y float64) (plotRow, string) {
	t := row.Target
	pr := plotRow{Name: t.Name, CaptionY: y + 12, AxisY: y + 30, BandY: y + 22, TickTop: y + 17, TickBottom: y + 43}
	allowed := dotlab.Decimal("")
	if row.Official != nil {
		allowed = row.Official.Allowed
	} else if c, err := dotlab.Compare(t, t.Value); err == nil {
		allowed = c.Allowed
	}
	pr.Caption = fmt.Sprintf("%s — published %s ± %s (%s)", t.Name, t.Value, allowed, t.Tolerance.Type)
	type rerun struct {
		ch    int
		c     *dotlab.Comparison
		value *big.Rat
	}
	var reruns []rerun
	if row.Official != nil {
		reruns = append(reruns, rerun{ch: 0, c: row.Official})
	}
	for i, cell := range row.Challenges {
		if cell.Comparison != nil {
			reruns = append(reruns, rerun{ch: i + 1, c: cell.Comparison})
		}
	}
	pub, perr := t.Value.Rat()
	al, aerr := allowed.Rat()
	if perr != nil || aerr != nil { // never for a listed manifest; draw no band
		pub, al = new(big.Rat), new(big.Rat)
	}
	lo, hi := new(big.Rat).Sub(pub, al), new(big.Rat).Add(pub, al)
	for i := range reruns {
		if v, err := reruns[i].c.Rerun.Rat(); err == nil {
			reruns[i].value = v
			lo, hi = ratMin(lo, v), ratMax(hi, v)
		}
	}
	s := newScale(lo, hi, pub)
	pr.PubX = s.x(pub)
	pr.BandX, pr.BandW = s.x(new(big.Rat).Sub(pub, al)), s.x(new(big.Rat).Add(pub, al))-s.x(new(big.Rat).Sub(pub, al))
	if pr.BandW < minBand { // a zero (or very narrow) tolerance still shows
		pr.BandX, pr.BandW = pr.PubX-minBand/2, minBand
	}
	text := []string{pr.Caption}
	for i, r := range reruns {
		who := "run"
		if r.ch > 0 {
			who = fmt.Sprintf("challenge %d", r.ch)
		}
		verdict := "outside tolerance"
		if r.c.Match {
			verdict = "within tolerance"
		}
		m := plotMark{X: s.x(r.value), Challenger: r.ch, Text: fmt.Sprintf("%s %s %s", who, r.c.Rerun, map[bool]string{true: "✓", false: "✗"}[r.c.Match]),
			LX: plotLeft + valueColumn*float64(i%valuesPer), LY: y + rowBase - 4 + valueLine*float64(i/valuesPer)}
		if r.value == nil {
			m.X = -1
		} else if r.ch > 0 {
			m.Diamond = fmt.Sprintf("M%.1f %.1fl6 6-6 6-6-6z", m.X, pr.AxisY-6)
		}
		pr.Marks = append(pr.Marks, m)
		text = append(text, fmt.Sprintf("%s %s, %s", who, r.c.Rerun, verdict))
	}
	return pr, strings.Join(text, "; ") + "."
}

// scale maps the exact interval [lo, hi], padded by 8% each side, onto
// the plot's width; an empty interval (every value equal) is centred on
// ±10% of the published value (±1 at zero).
type scale struct{ lo, span *big.Rat }

func newScale(lo, hi, pub *big.Rat) scale {
	span := new(big.Rat).Sub(hi, lo)
	if span.Sign() == 0 {
		pad := new(big.Rat).Abs(pub)
		pad.Quo(pad, big.NewRat(10, 1))
		if pad.Sign() == 0 {
			pad.SetInt64(1)
		}
		return scale{lo: new(big.Rat).Sub(lo, pad), span: new(big.Rat).Mul(pad, big.NewRat(2, 1))}
	}
	pad := new(big.Rat).Mul(span, big.NewRat(8, 100))
	return scale{lo: new(big.Rat).Sub(lo, pad), span: new(big.Rat).Add(span, new(big.Rat).Mul(pad, big.NewRat(2, 1)))}
}

// x is v's position in px: the fraction (v − lo) / span is exact, then a
// float in [0, 1].
func (s scale) x(v *big.Rat) float64 {
	if v == nil {
		return 0
	}
	f, _ := new(big.Rat).Quo(new(big.Rat).Sub(v, s.lo), s.span).Float64()
	return plotLeft + f*(plotWidth-plotLeft-plotRight)
}

func ratMin(a, b *big.Rat) *big.Rat {
	if b.Cmp(a) < 0 {
		return b
	}
	return a
}

func ratMax(a, b *big.Rat) *big.Rat {
	if b.Cmp(a) > 0 {
		return b
	}
	return a
}
