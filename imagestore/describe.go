package imagestore

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Info describes one image of the store (dotlab image show).
type Info struct {
	Digest         string            `json:"digest"`
	ManifestDigest string            `json:"manifest_digest,omitempty"`
	Refs           []string          `json:"refs,omitempty"`
	OS             string            `json:"os"`
	Architecture   string            `json:"architecture"`
	Env            []string          `json:"env,omitempty"`
	Layers         []LayerInfo       `json:"layers"`
	CompressedSize int64             `json:"compressed_size"`
	Labels         map[string]string `json:"labels,omitempty"` // all but PackagesLabel
	Packages       []string          `json:"packages,omitempty"`
}

// LayerInfo is one layer of Info.
type LayerInfo struct {
	Digest    string `json:"digest"`
	DiffID    string `json:"diff_id"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
}

// Describe returns the Info of the image named by ref: a digest, or
// NAME@DIGEST (the name is ignored; the digest decides).
func (s *Store) Describe(ref string) (*Info, error) {
	d, err := ParseDigest(ref[strings.LastIndex(ref, "@")+1:])
	if err != nil {
		return nil, err
	}
	img, err := s.Image(d)
	if err != nil {
		return nil, err
	}
	info := &Info{Digest: img.Digest.String(), OS: img.Config.OS, Architecture: img.Config.Architecture,
		Env: img.Config.Config.Env, Packages: img.Packages()}
	if img.ManifestDigest != img.Digest {
		info.ManifestDigest = img.ManifestDigest.String()
	}
	entries, err := s.List()
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Digest == info.Digest && e.Ref != "" {
			info.Refs = append(info.Refs, e.Ref)
		}
	}
	for i, l := range img.Manifest.Layers {
		info.Layers = append(info.Layers, LayerInfo{Digest: l.Digest.String(), DiffID: img.Config.RootFS.DiffIDs[i].String(),
			MediaType: string(l.MediaType), Size: l.Size})
		info.CompressedSize += l.Size
	}
	for k, v := range img.Config.Config.Labels {
		if k != PackagesLabel {
			if info.Labels == nil {
				info.Labels = map[string]string{}
			}
			info.Labels[k] = v
		}
	}
	return info, nil
}

// WriteText writes info as tab-separated lines: digest, manifest, name,
// platform, env, layer, label (sorted) and package lines.
func (info *Info) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "digest\t%s\n", info.Digest)
	if info.ManifestDigest != "" {
		fmt.Fprintf(&b, "manifest\t%s\n", info.ManifestDigest)
	}
	for _, r := range info.Refs {
		fmt.Fprintf(&b, "name\t%s\n", r)
	}
	fmt.Fprintf(&b, "platform\t%s/%s\n", info.OS, info.Architecture)
	for _, e := range info.Env {
		fmt.Fprintf(&b, "env\t%s\n", e)
	}
	for _, l := range info.Layers {
		fmt.Fprintf(&b, "layer\t%s\t%s\t%d bytes\n", l.Digest, l.MediaType, l.Size)
	}
	keys := make([]string, 0, len(info.Labels))
	for k := range info.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "label\t%s=%s\n", k, info.Labels[k])
	}
	for _, p := range info.Packages {
		fmt.Fprintf(&b, "package\t%s\n", p)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ParseLabels turns KEY=VALUE arguments into BuildOptions.Labels (nil when
// there are none); the value may hold "=", commas and newlines.
func ParseLabels(args []string) (map[string]string, error) {
	var labels map[string]string
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q: want KEY=VALUE", a)
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = v
	}
	return labels, nil
}

// Packages returns the installed package list an image records under
// PackagesLabel ("package=version" entries), or nil when it records none.
func (img *Image) Packages() []string {
	if img == nil || img.Config == nil {
		return nil
	}
	list := strings.TrimSpace(img.Config.Config.Labels[PackagesLabel])
	if list == "" {
		return nil
	}
	return strings.Split(list, "\n")
}
