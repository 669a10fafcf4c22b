package web

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseLogFilters(t *testing.T) {
	log := strings.Join([]string{
		`{"t":"2026-01-01T00:00:01Z","level":"info","step":"inputs","msg":"sleep.csv verified","data":{}}`,
		`{"t": "2026-01-01T00:00:02Z", "level": "warn", "step": "compare", "msg": "a \u003c b: sd_diff outside", "data": {"rerun": "1.2299"}}`,
		`not json <b>at all</b>`,
		``,
		`{"level":"error","step":"execute","msg":"exit status 1"}`,
		`{"level":"\u0065rror","step":"comp\u0061re","msg":"secr\u0065t path a\/b"}`, // escapes hide nothing
	}, "\n")
	for _, tc := range []struct {
		f    logFilter
		want []int // line numbers
	}{
		{logFilter{}, []int{1, 2, 3, 5, 6}},
		{logFilter{Level: "error"}, []int{5, 6}},  // escaped value
		{logFilter{Step: "compare"}, []int{2, 6}}, // escaped value
		{logFilter{Text: "secret"}, []int{6}},     // escaped text
		{logFilter{Text: "a/b"}, []int{6}},        // \/ escape
		{logFilter{Step: `ex"ecute`}, nil},        // quotes in the filter
		{logFilter{Level: "warn"}, []int{2}},      // spaced JSON still matches
		{logFilter{Level: "raw"}, []int{3}},       // lines that are not JSON
		{logFilter{Step: "execute"}, []int{5}},    // exact step
		{logFilter{Text: "A < B"}, []int{2}},      // text JSON escapes, case-insensitive
		{logFilter{Text: "1.2299"}, []int{2}},     // text in data
		{logFilter{Text: "verified", Level: "warn"}, nil},
		{logFilter{Level: "info", Step: "inputs", Text: "SLEEP"}, []int{1}},
	} {
		lines, next := parseLog([]byte(log), tc.f, 1)
		var got []int
		for _, l := range lines {
			got = append(got, l.N)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || next != 0 {
			t.Errorf("%+v: lines %v next %d, want %v", tc.f, got, next, tc.want)
		}
	}
	if lines, _ := parseLog([]byte(log), logFilter{}, 1); lines[2].Level != "raw" || lines[2].Msg != "not json <b>at all</b>" || lines[1].Data != `{"rerun": "1.2299"}` {
		t.Errorf("decoded lines: %+v", lines)
	}
}

func TestParseLogPages(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 2*logPage+10; i++ {
		fmt.Fprintf(&b, `{"level":"info","step":"execute","msg":"line %d"}`+"\n", i)
	}
	lines, next := parseLog([]byte(b.String()), logFilter{}, 1)
	if len(lines) != logPage || next != logPage+1 || lines[0].N != 1 {
		t.Fatalf("page 1: %d lines, next %d", len(lines), next)
	}
	lines, next = parseLog([]byte(b.String()), logFilter{}, next)
	if len(lines) != logPage || lines[0].N != logPage+1 || next != 2*logPage+1 {
		t.Fatalf("page 2: %d lines from %d, next %d", len(lines), lines[0].N, next)
	}
	lines, next = parseLog([]byte(b.String()), logFilter{}, next)
	if len(lines) != 10 || next != 0 || lines[9].Msg != fmt.Sprintf("line %d", 2*logPage+10) {
		t.Fatalf("last page: %d lines, next %d", len(lines), next)
	}
}

func TestParseLogClipsHugeLines(t *testing.T) {
	huge := strings.Repeat("<", 1<<20)
	log := fmt.Sprintf(`{"level":"info","step":"execute","msg":%q}`+"\n", huge)
	log = strings.Repeat(log, 8)
	lines, next := parseLog([]byte(log), logFilter{}, 1)
	if len(lines) == 0 || len(lines[0].Msg) > logField+100 || !strings.Contains(lines[0].Msg, "1048576 bytes in all") {
		t.Fatalf("line not clipped: %d lines, first %d bytes", len(lines), len(lines[0].Msg))
	}
	if len(lines) != 8 || next != 0 {
		t.Fatalf("%d lines next %d", len(lines), next)
	}
	var many strings.Builder
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&many, `{"level":"info","step":"execute","msg":%q}`+"\n", strings.Repeat("x", 3000))
	}
	lines, next = parseLog([]byte(many.String()), logFilter{}, 1)
	if next == 0 || len(lines) >= 400 || len(lines) < 50 {
		t.Fatalf("page bytes not bounded: %d lines, next %d", len(lines), next)
	}
}
