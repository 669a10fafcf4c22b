// Package netpolicy is the one statement of which URLs, hosts and network
// addresses a stranger's manifest may make a DotLab machine reach
// (docs/sandbox.md "Fetching what a manifest names", docs/threat-model.md
// "Hostile manifests", "SSRF and local files").
//
// Both sides of the protocol call it, so they cannot drift: the server when
// it lists a claim (manifest.CheckListing, POST /api/v1/claims, `dotlab claim
// submit`) and every runner before and while it fetches (runner.Policy:
// CheckURL on every manifest URL and redirect, CheckAddr in the dialer's
// Control hook on every resolved address). What a strict runner refuses by
// the form of a URL therefore cannot be listed.
//
// The rules are about form only: netpolicy never resolves a name. A DNS name
// that resolves to a refused address passes here and is refused by the
// runner's dialer when it connects (Rules.Addr on the dialled address).
package netpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// ErrRefused marks a URL, host or address the rules do not allow. Every
// refusal wraps it, so errors.Is(err, ErrRefused) tells a refusal (the
// manifest as written cannot be fetched) from a transient failure.
var ErrRefused = errors.New("refused by the fetch policy")

// Rules decides what a manifest may name. The zero value is the strict rule
// set of agents that take work from a server and of every public listing:
// https only (image registries over https), no local files, no credentials
// in URLs, and no host that is a loopback, private, link-local, CGNAT,
// multicast, unspecified, reserved or cloud-metadata address literal (in any
// spelling resolvers accept) or a localhost name.
type Rules struct {
	// AllowPrivate (--allow-private-urls on runners and on `dotlab serve`)
	// also admits loopback, private, CGNAT, multicast, unspecified and
	// reserved addresses, localhost names, plain http, git:// and plain-http
	// registries: for a private deployment, tests and the demo. Link-local
	// addresses (169.254.0.0/16, fe80::/10, where every cloud's metadata
	// service lives) and the cloud-metadata addresses outside it stay
	// refused, also when embedded in an IPv6 transition address.
	AllowPrivate bool
	// AllowFile admits file:// URLs (file:///abs/path or
	// file://localhost/abs/path) and local paths. Only a local `dotlab rerun`
	// of one's own manifest sets it; a listing never does.
	AllowFile bool
}

// URL checks the form of raw, a URL a manifest names (a dataset, a code
// repository or archive) or a redirect points to, and returns it parsed.
// what names the field for the error ("$.datasets[0].url"). The error, when
// not nil, wraps ErrRefused and reads "<what>: <why>: <fix>"; it never
// repeats the URL (it may carry credentials).
//
// Refused: whitespace or control characters; text url.Parse rejects; URL
// userinfo (user:pass@); schemes other than https (http and git with
// AllowPrivate; file and local paths with AllowFile; Windows drive paths and
// scheme-relative //host URLs never); a network URL without a host; a host
// that Host refuses.
func (r Rules) URL(what, raw string) (*url.URL, error) {
	if strings.IndexFunc(raw, func(c rune) bool { return c <= ' ' || c == 0x7f }) >= 0 {
		return nil, refusedf(what, "contains a space or a control character: percent-encode it (a space is %%20)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, which may hold credentials
		}
		return nil, refusedf(what, "is not a URL (%v): give an https:// URL", err)
	}
	if u.User != nil {
		return nil, refusedf(what, "has credentials in the URL (user:password@): remove them; a listed input must be fetchable without credentials")
	}
	switch u.Scheme {
	case "https":
	case "http", "git":
		if !r.AllowPrivate {
			// A host refused even on a private deployment (link-local,
			// metadata, odd IPv4 spellings) is the problem to name: the
			// --allow-private-urls hint would not help.
			private := r
			private.AllowPrivate = true
			if h := u.Hostname(); h != "" {
				if err := private.Host(what, h); err != nil {
					return nil, err
				}
			}
			return nil, refusedf(what, "plain %s:// has no integrity or confidentiality: use https:// (a private deployment may pass --allow-private-urls)", u.Scheme)
		}
	case "file":
		if !r.AllowFile {
			return nil, refusedf(what, "names a local file (file://): use an https:// URL any runner can fetch (only `dotlab rerun --allow-local DIR` of your own manifest reads local files)")
		}
		if u.Opaque != "" || u.Path == "" {
			return nil, refusedf(what, "is not a file URL with an absolute path: write file:///absolute/path")
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, refusedf(what, "file:// names another host (%s): write file:///absolute/path", u.Host)
		}
		return u, nil
	case "":
		if u.Host != "" {
			return nil, refusedf(what, "has no scheme (//host/…): write https://host/…")
		}
		if !r.AllowFile {
			return nil, refusedf(what, "is a local path: use an https:// URL any runner can fetch (only `dotlab rerun --allow-local DIR` of your own manifest reads local files)")
		}
		if u.Path == "" {
			return nil, refusedf(what, "is empty: give an https:// URL")
		}
		return u, nil
	default:
		if len(u.Scheme) == 1 {
			return nil, refusedf(what, "is a Windows drive path (%s:): runners fetch https:// URLs only", strings.ToUpper(u.Scheme))
		}
		return nil, refusedf(what, "scheme %q is not fetched by any runner: use https://", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, refusedf(what, "names no host: write %s://host/path", u.Scheme)
	}
	if err := checkPort(what, u.Port(), strings.HasSuffix(u.Host, ":")); err != nil {
		return nil, err
	}
	if err := r.Host(what, u.Hostname()); err != nil {
		return nil, err
	}
	return u, nil
}

// Host checks a host as written in a URL or an image reference (without
// brackets or port): an IPv6 literal (zone allowed), an IPv4 literal or a
// DNS name. A host whose last label is a number (decimal, or hex with 0x,
// as the WHATWG URL standard and inet_aton read it) is an IPv4 address: it
// must be written in dotted decimal (2130706433, 0x7f.1, 017700000001 and
// 127.1 are refused, naming the address they spell) and is then checked by
// Addr. localhost and *.localhost (RFC 6761) count as loopback. A non-ASCII
// host is refused (write its xn-- form). Any other DNS name passes: its
// addresses are checked when dialled.
func (r Rules) Host(what, host string) error {
	h := strings.TrimSuffix(host, ".")
	if h == "" {
		return refusedf(what, "names no host")
	}
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			return refusedf(what, "host %q is not ASCII: write an internationalised name in its xn-- (IDNA) form", host)
		}
	}
	lower := strings.ToLower(h)
	if !strings.Contains(h, ":") && (strings.Contains(h, "..") || strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".")) {
		// One trailing dot (the DNS root) is fine; an empty label is not a
		// name any resolver answers the same way (RFC 1035 §2.3.1).
		return refusedf(what, "host %q has an empty label: write the name without empty labels (one trailing dot at most)", host)
	}
	if strings.Contains(h, ":") {
		ip, err := netip.ParseAddr(h)
		if err != nil {
			return refusedf(what, "host [%s] is not a valid IPv6 address", host)
		}
		return wrapAddr(what, r.Addr(ip))
	}
	if endsInNumber(lower) {
		ip, ok := ParseIPv4(lower)
		if !ok {
			return refusedf(what, "host %q ends in a number but is not an IPv4 address: a host ending in a number is read as an address; use a DNS name or a dotted-decimal address", host)
		}
		if canon, err := netip.ParseAddr(lower); err != nil || canon != ip {
			return refusedf(what, "host %q is the IPv4 address %s written in a non-standard form: write addresses in dotted decimal", host, ip)
		}
		return wrapAddr(what, r.Addr(ip))
	}
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		if !r.AllowPrivate {
			return refusedf(what, "host %s is loopback (localhost names, RFC 6761): name a public host (a private deployment may pass --allow-private-urls)", host)
		}
	}
	return nil
}

// ImageRef checks the registry host of an image reference
// (NAME@sha256:<64 hex>, parsed as imagestore.ParseRef and
// go-containerregistry parse it, so a name without a registry means Docker
// Hub): the host must pass Host, and a registry that go-containerregistry
// would reach over plain http (localhost, *.local, RFC 1918 and loopback
// literals) needs AllowPrivate. what names the field ("$.environment.image").
func (r Rules) ImageRef(what, ref string) error {
	d, err := name.NewDigest(ref)
	if err != nil {
		return refusedf(what, "is not an image reference NAME@sha256:<64 hex> (%v)", err)
	}
	reg := d.Context().Registry
	hostport := reg.RegistryStr()
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if err := r.Host(what+": registry "+hostport, host); err != nil {
		return err
	}
	if _, port, err := net.SplitHostPort(hostport); err == nil {
		if err := checkPort(what+": registry "+hostport, port, port == ""); err != nil {
			return err
		}
	}
	if reg.Scheme() == "http" && !r.AllowPrivate {
		return refusedf(what, "registry %s would be reached over plain http: use a registry served over https (a private deployment may pass --allow-private-urls)", hostport)
	}
	return nil
}

// metadataAddrs are cloud instance-metadata endpoints outside link-local
// space: Alibaba Cloud's (CGNAT) and AWS's IPv6 ones (ULA). The link-local
// ones (169.254.169.254 on AWS, GCP, Azure, Oracle; 169.254.170.2 ECS;
// 169.254.170.23 EKS) are covered by refusing link-local space outright.
var metadataAddrs = [...]netip.Addr{
	netip.AddrFrom4([4]byte{100, 100, 100, 200}),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("fd00:ec2::23"),
}

// reservedPrefixes are special-purpose ranges (IANA special-purpose address
// registries, RFC 6890 and successors) that no public dataset, repository
// or registry lives in, beyond what netip's predicates cover: "this network",
// IETF protocol assignments, the documentation and benchmarking nets, the
// 6to4 relay anycast, the former class E and broadcast; IPv4-compatible,
// NAT64, 6to4 and Teredo IPv6 (which embed IPv4 addresses that could be
// private), discard-only, ORCHID, SRv6 SIDs, deprecated site-local and IPv6
// documentation.
var reservedPrefixes = [...]netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // CGNAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated (RFC 2765, SIIT)
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2001:2::/48"),
	netip.MustParsePrefix("2001:10::/28"),
	netip.MustParsePrefix("2001:20::/28"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("3fff::/20"),
	netip.MustParsePrefix("5f00::/16"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fec0::/10"),
}

// Addr says whether a connection to ip is allowed: nil, or an error naming
// the address and its class that wraps ErrRefused. IPv4-mapped IPv6
// addresses are judged as the IPv4 address they map; a zone is ignored.
// Link-local and cloud-metadata addresses, also embedded in an
// IPv4-compatible, NAT64, 6to4 or Teredo address, are refused even with
// AllowPrivate.
func (r Rules) Addr(ip netip.Addr) error {
	ip = ip.WithZone("").Unmap()
	for _, a := range append([]netip.Addr{ip}, embeddedIPv4(ip)...) {
		for _, m := range metadataAddrs {
			if a == m {
				return fmt.Errorf("address %s (cloud metadata) is %w: name a public host (refused even with --allow-private-urls)", ip, ErrRefused)
			}
		}
		if a.IsLinkLocalUnicast() {
			return fmt.Errorf("address %s (link-local, where cloud metadata services live) is %w: name a public host (refused even with --allow-private-urls)", ip, ErrRefused)
		}
	}
	if r.AllowPrivate {
		return nil
	}
	if class := classify(ip); class != "" {
		return fmt.Errorf("address %s (%s) is %w: name a public host (a private deployment may pass --allow-private-urls)", ip, class, ErrRefused)
	}
	return nil
}

// classify names the non-public class of ip, or "" for a public address.
func classify(ip netip.Addr) string {
	switch {
	case !ip.IsValid():
		return "invalid"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast():
		return "multicast"
	}
	for _, p := range reservedPrefixes {
		if p.Contains(ip) {
			return "reserved: " + p.String()
		}
	}
	return ""
}

// embeddedIPv4 returns the IPv4 addresses an IPv6 transition address
// carries: IPv4-compatible (::a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d),
// NAT64 (64:ff9b::a.b.c.d, RFC 6052),
// 6to4 (2002:AABB:CCDD::/48, RFC 3056) and Teredo's client address
// (2001:0::/32, the last 32 bits inverted, RFC 4380).
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	var v4 [4]byte
	switch {
	case netip.MustParsePrefix("::/96").Contains(ip), netip.MustParsePrefix("::ffff:0:0:0/96").Contains(ip), netip.MustParsePrefix("64:ff9b::/96").Contains(ip):
		copy(v4[:], b[12:])
	case netip.MustParsePrefix("2002::/16").Contains(ip):
		copy(v4[:], b[2:6])
	case netip.MustParsePrefix("2001::/32").Contains(ip):
		for i := range v4 {
			v4[i] = b[12+i] ^ 0xff
		}
	default:
		return nil
	}
	return []netip.Addr{netip.AddrFrom4(v4)}
}

// checkPort refuses a port that is present but empty, not a decimal
// number, or outside 1–65535: such a URL parses, but no runner can connect
// to it, so listing it would leave every runner without an outcome.
func checkPort(what, port string, empty bool) error {
	if empty {
		return refusedf(what, "has an empty port after ':': drop the ':' or give a port 1-65535")
	}
	if port == "" {
		return nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return refusedf(what, "port %q is not a number from 1 to 65535", port)
	}
	return nil
}

// endsInNumber reports whether host's last label is a number in the WHATWG
// URL standard's sense (all decimal digits, or 0x followed by hex digits),
// which makes URL parsers and resolvers read the whole host as IPv4.
func endsInNumber(host string) bool {
	labels := strings.Split(host, ".")
	last := labels[len(labels)-1]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		return strings.Trim(last[2:], "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// ParseIPv4 parses host (lower case) as the IPv4 forms inet_aton(3) and the
// WHATWG URL standard accept: one to four dot-separated parts, each decimal,
// octal (leading 0) or hex (0x); the last part fills the remaining bytes
// (127.1 is 127.0.0.1; 2130706433 is 127.0.0.1). ok is false when host is
// not such an address.
func ParseIPv4(host string) (ip netip.Addr, ok bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if p == "" || err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

func refusedf(what, format string, args ...any) error {
	return fmt.Errorf("%s: %s (%w)", what, fmt.Sprintf(format, args...), ErrRefused)
}

func wrapAddr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
