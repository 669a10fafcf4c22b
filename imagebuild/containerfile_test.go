package imagebuild

import (
	"errors"
	"strings"
	"testing"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestContainerfileAcceptsDigestStagesAndContinuations(t *testing.T) {
	src := "# syntax=docker/dockerfile:1\n" +
		"ARG V=1\n" +
		"FROM dotlab.example/python@" + testDigest + " AS build\n" +
		"RUN apt-get update && \\\n" +
		"    # a comment inside the continuation\n" +
		"\n" +
		"    apt-get install -y hello\n" +
		"FROM scratch\n" +
		"COPY --from=build /usr/bin/hello /hello\n" +
		"COPY --from=0 --chmod=0755 a b /x/\n" +
		"ADD --chown=1000:1000 data.tar.gz /data/\n" +
		"CMD [\"/hello\"]\n"
	cf, err := ParseContainerfile([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.Stages) != 2 || !cf.Stages[0].External || cf.Stages[1].External || cf.Stages[0].Name != "build" {
		t.Fatalf("stages: %+v", cf.Stages)
	}
	run := cf.Stages[0].Body[0]
	if run.Keyword != "RUN" || run.Line != 4 || run.Args != "apt-get update &&     apt-get install -y hello" {
		t.Fatalf("joined RUN: %+v", run)
	}
	text := cf.Text(func(i int) string { return "localhost/dotlab-base:x" }, "")
	want := "ARG V=1\nFROM localhost/dotlab-base:x AS build\nRUN apt-get update &&     apt-get install -y hello\nFROM scratch\n" +
		"COPY --from=build /usr/bin/hello /hello\nCOPY --from=0 --chmod=0755 a b /x/\nADD --chown=1000:1000 data.tar.gz /data/\nCMD [\"/hello\"]\n"
	if text != want {
		t.Fatalf("text:\n%s\nwant:\n%s", text, want)
	}
}

func TestContainerfileRefusalsNameTheRule(t *testing.T) {
	base := "FROM dotlab.example/python@" + testDigest + "\n"
	cases := []struct{ name, src, rule string }{
		{"tag", "FROM debian:bookworm\n", "FROM by digest only"},
		{"no tag", "FROM debian\n", "FROM by digest only"},
		{"variable", "ARG B=debian@" + testDigest + "\nFROM $B\n", "FROM by digest only"},
		{"platform", "FROM --platform=linux/arm64 x@" + testDigest + "\n", "FROM by digest only"},
		{"add url", base + "ADD https://example.org/x.tar.gz /x\n", "no ADD <url>"},
		{"add git", base + "ADD git@github.com:a/b.git /b\n", "no ADD <url>"},
		{"add url continued", base + "ADD \\\n  http://example.org/x /x\n", "no ADD <url>"},
		{"add variable", base + "ARG U\nADD $U /x\n", "no ADD <url>"},
		{"add checksum", base + "ADD --checksum=sha256:00 a /x\n", "no ADD <url>"},
		{"copy from tag", base + "COPY --from=busybox:latest /bin/sh /sh\n", "COPY --from a stage only"},
		{"copy from digest", base + "COPY --from=busybox@" + testDigest + " /bin/sh /sh\n", "COPY --from a stage only"},
		{"copy from later stage", base + "COPY --from=1 /a /b\n", "COPY --from a stage only"},
		{"run mount", base + "RUN --mount=type=bind,source=/,target=/host cat /host/etc/shadow\n", "RUN without host mounts"},
		{"run network", base + "RUN --network=host true\n", "RUN without host mounts"},
		{"onbuild", base + "ONBUILD RUN true\n", "read alike"},
		{"escape", "# escape=`\n" + base, "read alike"},
		{"unknown", base + "FETCH x\n", "read alike"},
		{"dangling", base + "RUN true \\\n", "read alike"},
		{"before from", "RUN true\n" + base, "FROM first"},
		{"no from", "ARG X=1\n", "FROM NAME@sha256"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseContainerfile([]byte(c.src))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.rule) {
				t.Fatalf("error %q: want ErrRefused naming %q", err, c.rule)
			}
		})
	}
}

func TestContainerfileBounds(t *testing.T) {
	big := strings.Repeat("#", MaxContainerfileBytes+1)
	if _, err := ParseContainerfile([]byte(big)); !errors.Is(err, ErrRefused) {
		t.Fatalf("oversized: %v", err)
	}
	many := "FROM scratch\n" + strings.Repeat("ENV A=1\n", MaxInstructions+1)
	if _, err := ParseContainerfile([]byte(many)); err == nil || !strings.Contains(err.Error(), "bounded build") {
		t.Fatalf("too many instructions: %v", err)
	}
}

// TestContainerfileAddCopyWordsAreReadAsBuildahReadsThem: buildah removes
// backslash escapes and quotes from ADD/COPY words before it reads them, so
// an escaped URL or git source must not pass as a local path; ADD of any
// remote source and COPY --from of the stage itself are refused in the
// parser.
func TestContainerfileAddCopyWordsAreReadAsBuildahReadsThem(t *testing.T) {
	base := "FROM dotlab.example/python@" + testDigest + "\n"
	cases := []struct{ name, src, rule string }{
		{"escaped url", base + "ADD http:\\/\\/127.0.0.1:9/pkg /opt/x\n", "read alike"},
		{"escaped git", base + "ADD g\\it@example.org:r.git /opt/x\n", "read alike"},
		{"lower-case escaped url", base + "add http:\\/\\/x/y /z\n", "read alike"},
		{"quoted url", base + "ADD \"http:\"//x/y /z\n", "read alike"},
		{"single-quoted url", base + "ADD 'http://x/y' /z\n", "read alike"},
		{"copy escaped", base + "COPY a\\ b /z\n", "read alike"},
		{"copy from escaped", base + "FROM x@" + testDigest + " AS b\nCOPY --from=\\b /a /z\n", "COPY --from a stage only"},
		{"scp-like git", base + "ADD user@example.org:r.git /opt/x\n", "no ADD <url>"},
		{"git scheme", base + "ADD git://example.org/r.git /opt/x\n", "no ADD <url>"},
		{"bare github", base + "ADD github.com/a/b /opt/x\n", "no ADD <url>"},
		{"scheme without slashes", base + "ADD http:example.org/x /opt/x\n", "no ADD <url>"},
		{"copy from itself by index", base + "COPY --from=0 /a /b\n", "COPY --from a stage only"},
		{"copy from itself by name", "FROM x@" + testDigest + " AS me\nCOPY --from=me /a /b\n", "COPY --from a stage only"},
		{"copy from itself, second stage", base + "FROM scratch AS two\nCOPY --from=two /a /b\n", "COPY --from a stage only"},
		{"copy from empty", base + "COPY --from= /a /b\n", "COPY --from a stage only"},
		{"stage name escaped", "FROM x@" + testDigest + " AS a\\b\nFROM a\\b\n", "FROM by digest only"},
		{"stage name quoted", "FROM x@" + testDigest + " AS \"b\"\n", "FROM by digest only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseContainerfile([]byte(c.src))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.rule) {
				t.Fatalf("error %q: want ErrRefused naming %q", err, c.rule)
			}
		})
	}
	// An earlier stage, by name or index, stays admitted.
	ok := base + "FROM scratch AS two\nCOPY --from=0 /a /b\nFROM scratch\nCOPY --from=two /b /c\nCOPY --from=1 /b /d\n"
	if _, err := ParseContainerfile([]byte(ok)); err != nil {
		t.Fatalf("earlier stages refused: %v", err)
	}
}
