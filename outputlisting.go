package dotlab

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"
)

// OutputListing pins an output listing that travels beside a run or
// challenge record instead of inside it (docs/protocol.md §6 "Output
// listing"): a record whose inline output_hashes would pass the 65,535
// bytes a log entry holds carries this instead, and every output's hash
// stays in the listing the server stores and serves. SHA256 is the
// listing's (64 lowercase hex, over its exact bytes), Count its entries and
// Bytes its length.
type OutputListing struct {
	SHA256 string `json:"sha256"`
	Count  int    `json:"count"`
	Bytes  int64  `json:"bytes"`
}

// Bounds of an output listing. The entries are the sandbox's output-count
// limit (sandbox.DefaultOutputFiles) plus the two captured streams and a
// margin for the scratch files a target source read; the bytes hold
// 100,000 entries whose names average 245 bytes.
const (
	MaxOutputListingEntries = 100_100
	MaxOutputListingBytes   = 32 << 20
	MaxOutputNameBytes      = 8192
	// InlineOutputHashesMax is the largest output_hashes (its JSON, in
	// bytes) an agent sends inline; above it DotLab's agent sends an
	// output listing (half the entry cap, leaving room for the rest of
	// the record).
	InlineOutputHashesMax = 32 << 10
)

// outputLine is one entry of a listing.
type outputLine struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// EncodeOutputListing writes hashes (output name → SHA-256) as a canonical
// output listing: one line per output, `{"name":N,"sha256":H}` in RFC 8785
// form followed by "\n", sorted by the names' UTF-8 bytes. It returns the
// bytes and their pin, or an EINVALID or ETOOLARGE *Error naming the entry
// that cannot be listed (the bounds of ParseOutputListing).
func EncodeOutputListing(hashes map[string]string) ([]byte, OutputListing, error) {
	names := make([]string, 0, len(hashes))
	for n := range hashes {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	for _, n := range names {
		if err := checkOutputEntry(n, hashes[n]); err != nil {
			return nil, OutputListing{}, err
		}
		appendOutputLine(&buf, n, hashes[n])
	}
	data := buf.Bytes()
	if err := checkListingSize(len(names), len(data)); err != nil {
		return nil, OutputListing{}, err
	}
	return data, PinOutputListing(data, len(names)), nil
}

// PinOutputListing is the pin of listing data of count entries.
func PinOutputListing(data []byte, count int) OutputListing {
	sum := sha256.Sum256(data)
	return OutputListing{SHA256: hex.EncodeToString(sum[:]), Count: count, Bytes: int64(len(data))}
}

// ParseOutputListing reads a canonical output listing (EncodeOutputListing's
// form): at most MaxOutputListingBytes and MaxOutputListingEntries, every
// line canonical, names non-empty valid UTF-8 of at most
// MaxOutputNameBytes, strictly ascending (so unique), hashes 64 lowercase
// hex. It returns the hashes, or an EINVALID (ETOOLARGE for the bounds)
// *Error naming the first line at fault.
func ParseOutputListing(data []byte) (map[string]string, error) {
	if len(data) > MaxOutputListingBytes {
		return nil, Errorf(ETOOLARGE, "output listing: %d bytes; at most %d", len(data), MaxOutputListingBytes)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, Errorf(EINVALID, "output listing: must end with a newline (every line, the last included)")
	}
	// The count is a cheap check (one pass): refuse before any line is
	// decoded.
	if n := bytes.Count(data, []byte{'\n'}); n > MaxOutputListingEntries {
		return nil, Errorf(ETOOLARGE, "output listing: %d entries; at most %d", n, MaxOutputListingEntries)
	}
	out := map[string]string{}
	prev, line := "", 0
	var canon bytes.Buffer
	for rest := data; len(rest) > 0; line++ {
		i := bytes.IndexByte(rest, '\n')
		raw := rest[:i]
		rest = rest[i+1:]
		if line >= MaxOutputListingEntries {
			return nil, Errorf(ETOOLARGE, "output listing: more than %d entries", MaxOutputListingEntries)
		}
		var l outputLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, Errorf(EINVALID, "output listing line %d: not a JSON object {\"name\",\"sha256\"}", line+1)
		}
		if err := checkOutputEntry(l.Name, l.SHA256); err != nil {
			return nil, Errorf(EINVALID, "output listing line %d: %s", line+1, ErrorLines(err)[0])
		}
		canon.Reset()
		appendOutputLine(&canon, l.Name, l.SHA256)
		if !bytes.Equal(canon.Bytes()[:canon.Len()-1], raw) {
			return nil, Errorf(EINVALID, "output listing line %d: not in canonical form (RFC 8785: keys name then sha256, no spaces, minimal escapes)", line+1)
		}
		if line > 0 && l.Name <= prev {
			return nil, Errorf(EINVALID, "output listing line %d: %q must sort after %q (ascending by UTF-8 bytes, each name once)", line+1, l.Name, prev)
		}
		prev = l.Name
		out[l.Name] = l.SHA256
	}
	return out, nil
}

func checkListingSize(count, n int) error {
	if count > MaxOutputListingEntries {
		return Errorf(ETOOLARGE, "output listing: %d entries; at most %d", count, MaxOutputListingEntries)
	}
	if n > MaxOutputListingBytes {
		return Errorf(ETOOLARGE, "output listing: %d bytes; at most %d (shorter output names)", n, MaxOutputListingBytes)
	}
	return nil
}

func checkOutputEntry(name, sum string) error {
	switch {
	case name == "" || !utf8.ValidString(name):
		return Errorf(EINVALID, "output name %q: must be non-empty valid UTF-8", name)
	case len(name) > MaxOutputNameBytes:
		return Errorf(EINVALID, "output name %.40q…: %d bytes; at most %d", name, len(name), MaxOutputNameBytes)
	case !sha256RE().MatchString(sum):
		return Errorf(EINVALID, "output %q: the hash must be 64 lowercase hex characters (a SHA-256)", name)
	}
	return nil
}

// appendOutputLine writes one canonical line (RFC 8785 string escapes:
// only '"', '\\' and the C0 controls; \b \t \n \f \r by name, the rest as
// \u00xx).
func appendOutputLine(buf *bytes.Buffer, name, sum string) {
	buf.WriteString(`{"name":"`)
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch c {
		case '"', '\\':
			buf.WriteByte('\\')
			buf.WriteByte(c)
		case '\b':
			buf.WriteString(`\b`)
		case '\t':
			buf.WriteString(`\t`)
		case '\n':
			buf.WriteString(`\n`)
		case '\f':
			buf.WriteString(`\f`)
		case '\r':
			buf.WriteString(`\r`)
		default:
			if c < 0x20 {
				fmt.Fprintf(buf, `\u%04x`, c)
			} else {
				buf.WriteByte(c)
			}
		}
	}
	buf.WriteString(`","sha256":"`)
	buf.WriteString(sum)
	buf.WriteString("\"}\n")
}

// check adds a problem under $.output_listing when the pin is malformed or
// comes with inline hashes other than results.json and the streams
// (a record with a listing keeps only those inline: its signature's
// subject and the evidence a challenger compares at a glance).
func (l *OutputListing) check(inline map[string]string, p *Problems) {
	if l == nil {
		return
	}
	if !sha256RE().MatchString(l.SHA256) {
		p.Add("$.output_listing.sha256", "must be 64 lowercase hex characters: the SHA-256 of the listing you uploaded")
	}
	if l.Count < 1 || l.Count > MaxOutputListingEntries {
		p.Add("$.output_listing.count", "is %d; must be 1 to %d", l.Count, MaxOutputListingEntries)
	}
	if l.Bytes < 1 || l.Bytes > MaxOutputListingBytes {
		p.Add("$.output_listing.bytes", "is %d; must be 1 to %d", l.Bytes, MaxOutputListingBytes)
	}
	for name := range inline {
		if !ListedInline(name) {
			p.Add(fmt.Sprintf("$.output_hashes[%q]", name), "with output_listing, output_hashes keeps only results.json, stream:stdout and stream:stderr (every output is in the listing)")
		}
	}
}

// ListedInline reports whether a record with an output listing may keep
// output name inline too: results.json and the two captured streams.
func ListedInline(name string) bool {
	return name == "results.json" || name == "stream:stdout" || name == "stream:stderr"
}

// CheckListingAgrees checks that every inline hash of a record with an
// output listing is the listing's for that name (EINVALID naming each
// that differs or is missing).
func CheckListingAgrees(inline, listed map[string]string) error {
	var p Problems
	for name, h := range inline {
		if listed[name] != h {
			p.Add(fmt.Sprintf("$.output_hashes[%q]", name), "is %s but the output listing has %q", h, listed[name])
		}
	}
	return p.Err()
}

// InlineOutputs splits hashes for a record that sends them as an output
// listing: the entries kept inline too (ListedInline).
func InlineOutputs(hashes map[string]string) map[string]string {
	out := map[string]string{}
	for n, h := range hashes {
		if ListedInline(n) {
			out[n] = h
		}
	}
	return out
}
