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
