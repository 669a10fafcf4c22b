package netpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// urlCases: what the strict rules, the private rules (AllowPrivate) and the
// local rules (AllowPrivate+AllowFile) say of each URL form.
var urlCases = []struct {
	raw                    string
	strict, private, local bool // allowed?
}{
	{"https://data.example.org/sleep.csv", true, true, true},
	{"https://data.example.org:8443/x", true, true, true},
	{"https://data.example.org./x", true, true, true},
	// Forms every runner fails on at once: refused at listing (adversarial review).
	{"https://data.example.org:99999/x", false, false, false},
	{"https://data.example.org:65536/x", false, false, false},
	{"https://data.example.org:0/x", false, false, false},
	{"https://data.example.org:/x", false, false, false},
	{"https://data.example.org../x", false, false, false},
	{"https://localhost../x", false, false, false},
	{"https://127.0.0.1../x", false, false, false},
	{"https://.example.org/x", false, false, false},
	{"https://[::ffff:0:7f00:1]/x", false, true, true},
	{"https://[::ffff:0:a9fe:a9fe]/x", false, false, false},
	{"https://example.org./x", true, true, true},
	{"https://93.184.216.34/x", true, true, true},
	{"https://[2606:2800:220:1:248:1893:25c8:1946]/x", true, true, true},
	{"http://data.example.org/x", false, true, true},
	{"git://code.example.org/r.git", false, true, true},
	{"file:///etc/passwd", false, false, true},
	{"file://localhost/etc/passwd", false, false, true},
	{"file://otherhost/etc/passwd", false, false, false},
	{"file:etc/passwd", false, false, false},
	{"/etc/passwd", false, false, true},
	{"./x", false, false, true},
	{"x/y.csv", false, false, true},
	{`C:\x`, false, false, false},
	{"C:/x", false, false, false},
	{"//example.org/x", false, false, false},
	{"", false, false, false},
	{"https://user:s3cr3t@example.org/x", false, false, false},
	{"https://user@example.org/x", false, false, false},
	{"https://@example.org/x", false, false, false},
	{"file://u:s3cr3t@localhost/etc/passwd", false, false, false},
	{"ftp://example.org/x", false, false, false},
	{"ssh://git@example.org/r.git", false, false, false},
	{"git+https://example.org/r.git", false, false, false},
	{"javascript:alert(1)", false, false, false},
	{"https:///etc/passwd", false, false, false},
	{"https:example.org", false, false, false},
	{"https://example.org/a b", false, false, false},
	{"https://example.org/a\tb", false, false, false},
	{"https://169.254.169.254/latest/meta-data/", false, false, false},
	{"http://169.254.169.254/", false, false, false},
	{"https://169.254.170.2/v2/credentials", false, false, false},
	{"https://100.100.100.200/latest/meta-data", false, false, false},
	{"https://[fd00:ec2::254]/", false, false, false},
	{"https://[fe80::1%25eth0]/", false, false, false},
	{"https://[::ffff:169.254.169.254]/", false, false, false},
	{"https://[64:ff9b::a9fe:a9fe]/", false, false, false}, // NAT64 of 169.254.169.254
	{"https://[2002:a9fe:a9fe::1]/", false, false, false},  // 6to4 of 169.254.169.254
	{"https://0xa9fea9fe/", false, false, false},
	{"http://127.0.0.1/", false, true, true},
	{"https://127.0.0.1:8090/x", false, true, true},
	{"https://[::1]/", false, true, true},
	{"https://[::ffff:127.0.0.1]/", false, true, true},
	{"https://10.0.0.1/", false, true, true},
	{"https://172.16.0.1/", false, true, true},
	{"https://192.168.1.1/", false, true, true},
	{"https://100.64.0.1/", false, true, true},
	{"https://0.0.0.0/", false, true, true},
	{"https://224.0.0.1/", false, true, true},
	{"https://192.0.2.1/", false, true, true},
	{"https://[fd12::1]/", false, true, true},
	{"https://127.0.0.1./", false, true, true},
	{"https://localhost/", false, true, true},
	{"https://LOCALHOST:8080/", false, true, true},
	{"https://a.b.localhost/", false, true, true},
	// Spellings of 127.0.0.1 that inet_aton and URL parsers accept: never,
	// whatever the rules (write the dotted-decimal address).
	{"https://2130706433/", false, false, false},
	{"https://0x7f.1/", false, false, false},
	{"https://0X7F000001/", false, false, false},
	{"https://017700000001/", false, false, false},
	{"https://127.1/", false, false, false},
	{"https://127.0.1/", false, false, false},
	{"https://0177.0.0.1/", false, false, false},
	{"https://0/", false, false, false},
	{"https://1.2.3.4.5/", false, false, false},
	{"https://example.123/", false, false, false},
	{"https://999.0.0.1/", false, false, false},
	{"https://１２７.0.0.1/", false, false, false},
	{"https://bücher.example/", false, false, false},
	{"https://xn--bcher-kva.example/", true, true, true},
	{"https://[::1/", false, false, false},
	{"https://u:s3cr3t@example.org/%zz", false, false, false},
	{"https://[1.2.3.4]/", false, false, false},
}

func TestURLForms(t *testing.T) {
	for _, c := range urlCases {
		for _, r := range []struct {
			name  string
			rules Rules
			want  bool
		}{{"strict", Rules{}, c.strict}, {"private", Rules{AllowPrivate: true}, c.private}, {"local", Rules{AllowPrivate: true, AllowFile: true}, c.local}} {
			_, err := r.rules.URL("$.datasets[0].url", c.raw)
			if (err == nil) != r.want {
				t.Errorf("%s URL(%q) = %v, want allowed=%v", r.name, c.raw, err, r.want)
				continue
			}
			if err == nil {
				continue
			}
			if !errors.Is(err, ErrRefused) {
				t.Errorf("%s URL(%q): %v does not wrap ErrRefused", r.name, c.raw, err)
			}
			if !strings.HasPrefix(err.Error(), "$.datasets[0].url: ") {
				t.Errorf("%s URL(%q): %q does not start with the field", r.name, c.raw, err)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("%s URL(%q): the error repeats the credentials: %q", r.name, c.raw, err)
			}
		}
	}
}

func TestNonStandardIPv4NamesTheAddress(t *testing.T) {
	for _, host := range []string{"2130706433", "0x7f.1", "017700000001", "127.1", "0x7f.0.0.1"} {
		err := Rules{AllowPrivate: true}.Host("h", host)
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), "dotted decimal") {
			t.Errorf("Host(%q) = %v, want a refusal naming 127.0.0.1", host, err)
		}
	}
}

func TestParseIPv4(t *testing.T) {
	for in, want := range map[string]string{
		"2130706433": "127.0.0.1", "0x7f.1": "127.0.0.1", "017700000001": "127.0.0.1", "127.1": "127.0.0.1",
		"0": "0.0.0.0", "0x": "0.0.0.0", "10.1.65535": "10.1.255.255", "0xa9.0xfe.0xa9.0xfe": "169.254.169.254",
		"4294967295": "255.255.255.255", "1.2.3.4": "1.2.3.4",
	} {
		got, ok := ParseIPv4(in)
		if !ok || got.String() != want {
			t.Errorf("ParseIPv4(%q) = %v %v, want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{"4294967296", "1.2.3.256", "1.2.65536", "256.1", "08", "1..2", "1.2.3.4.5", "0xg", "", "1.2.3."} {
		if got, ok := ParseIPv4(in); ok {
			t.Errorf("ParseIPv4(%q) = %v, want not an address", in, got)
		}
	}
}

func TestAddrClasses(t *testing.T) {
	for addr, want := range map[string][3]bool{ // strict, private allowed
		"93.184.216.34":            {true, true},
		"2606:4700::1111":          {true, true},
		"127.0.0.1":                {false, true},
		"::1":                      {false, true},
		"10.1.2.3":                 {false, true},
		"fd00::1":                  {false, true},
		"100.64.0.1":               {false, true},
		"240.0.0.1":                {false, true},
		"::":                       {false, true},
		"2001:db8::1":              {false, true},
		"169.254.169.254":          {false, false},
		"169.254.1.1":              {false, false},
		"fe80::1":                  {false, false},
		"100.100.100.200":          {false, false},
		"fd00:ec2::254":            {false, false},
		"fd00:ec2::23":             {false, false},
		"::ffff:169.254.1.1":       {false, false},
		"::169.254.169.254":        {false, false},
		"64:ff9b::a9fe:a9fe":       {false, false},
		"2002:a9fe:a9fe::":         {false, false},
		"2001:0:1:2:3:4:5601:5601": {false, false}, // Teredo client 169.254.169.254 xor ff..
		"fe80::1%eth0":             {false, false},
	} {
		ip := netip.MustParseAddr(addr)
		for i, r := range []Rules{{}, {AllowPrivate: true}} {
			err := r.Addr(ip)
			if (err == nil) != want[i] {
				t.Errorf("rules %+v Addr(%s) = %v, want allowed=%v", r, addr, err, want[i])
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Errorf("Addr(%s): %v does not wrap ErrRefused", addr, err)
			}
		}
	}
}

func TestImageRef(t *testing.T) {
	const dig = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for ref, want := range map[string][2]bool{ // strict, private allowed
		"registry.example.org/lab/python": {true, true},
		"python":                          {true, true},
		"ghcr.io/lab/x":                   {true, true},
		"dotlab.example/python":           {true, true},
		"93.184.216.34:5000/x":            {true, true},
		"127.0.0.1:5000/x":                {false, true},
		"10.0.0.1/x":                      {false, true},
		"localhost:5000/x":                {false, true},
		"registry.localhost:5000/x":       {false, true},
		"registry.local/x":                {true, true},
		"169.254.169.254/x":               {false, false},
		"169.254.169.254:80/x":            {false, false},
		"2130706433:5000/x":               {false, false},
		"0x7f.1/x":                        {false, false},
		"127.1:5000/x":                    {false, false},
	} {
		for i, r := range []Rules{{}, {AllowPrivate: true}} {
			err := r.ImageRef("$.environment.image", ref+dig)
			if (err == nil) != want[i] {
				t.Errorf("rules %+v ImageRef(%s) = %v, want allowed=%v", r, ref, err, want[i])
			}
			if err != nil && (!errors.Is(err, ErrRefused) || !strings.HasPrefix(err.Error(), "$.environment.image")) {
				t.Errorf("ImageRef(%s): %v", ref, err)
			}
		}
	}
	if err := (Rules{}).ImageRef("$.environment.image", "python:3.11"); err == nil {
		t.Error("a tag without a digest passed")
	}
}
