package scaffold

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/manifest"
)

// ImagePlaceholder is environment.image until the author builds the
// proposed recipe and writes the reference it prints.
const ImagePlaceholder = "REPLACE-with-image@sha256:<digest>"

// NotebookRecipe is the image recipe proposed for a Python package with a
// notebook: the scientific Python image with Jupyter's nbconvert and
// ipykernel (examples/images/python-notebook).
const NotebookRecipe = "examples/images/python-notebook/build.sh"

// hasNotebook: files holds a Jupyter notebook (*.ipynb).
func hasNotebook(files []string) bool {
	for _, f := range files {
		if strings.EqualFold(path.Ext(f), ".ipynb") {
			return true
		}
	}
	return false
}

// environment proposes the image (and requires) by the package's language.
func (b *builder) environment(files []string) error {
	lang, why := detectLanguage(files)
	if lang != LangOther {
		b.m.Requires = []string{string(lang)}
	}
	if b.opts.Image != "" {
		b.m.Environment.Image = b.opts.Image
		return nil
	}
	script, ref := lang.Recipe()
	if lang == LangPython && hasNotebook(files) {
		script, ref = NotebookRecipe, "dotlab.example/python-notebook@sha256:…"
		why += ", a notebook: the recipe has Jupyter's nbconvert and ipykernel"
	}
	b.m.Environment.Image = ImagePlaceholder
	kind := map[Language]string{LangR: "an R package", LangPython: "a Python package", LangOther: "neither R nor Python"}[lang]
	b.placeholder("$.environment.image", "standin.invalid/image@sha256:"+strings.Repeat("0", 64),
		"%s (%s): build %s and write the reference it prints (%s), or pass --image NAME@sha256:…", kind, why, script, ref)
	return nil
}

// targets proposes the targets and attaches their sources.
func (b *builder) targets() error {
	ts, err := proposeTargets(b.opts.Targets)
	if err != nil {
		return err
	}
	b.m.Targets = ts
	index := map[string]int{}
	for i, t := range ts {
		index[t.Name] = i
	}
	for _, s := range b.opts.Sources {
		name, src, err := parseSource(s)
		if err != nil {
			return err
		}
		i, ok := index[name]
		if !ok {
			return fmt.Errorf("--source %s: no --target %s=VALUE", name, name)
		}
		ts[i].Source = src
		if strings.HasPrefix(src.File, dotlab.SourceScratchDir) {
			b.m.Scratch = true
		}
	}
	if len(ts) == 0 {
		standIn := []any{map[string]any{"name": "standin", "value": json.Number("1"), "tolerance": map[string]any{"type": "absolute", "value": json.Number("0")}}}
		b.placeholder("$.targets", standIn, "no published value given: pass each as --target NAME=VALUE, exactly as the paper prints it (e.g. --target did=2.76)")
	}
	for i, t := range ts {
		at := fmt.Sprintf("$.targets[%d]", i)
		b.check(at+".tolerance", "absolute %s, half a unit in the last printed digit of %s: widen it if the paper rounds differently", t.Tolerance.Value, t.Value)
		if t.Source == nil {
			b.check(at+".source", "none: the package must write /work/out/results.json with key %q, or add a source (stdout or a file; regex, csv or json)", t.Name)
		}
	}
	return nil
}

// validate runs manifest.Parse on the manifest as printed, and on a copy
// whose placeholders hold valid stand-ins: what the copy still fails on
// are real problems, not fields left for the author.
func (r *Result) validate() error {
	m, err := manifest.Parse(r.JSON)
	if err == nil {
		r.Valid = true
		r.NotListable = dotlab.ErrorDetail(manifest.CheckListing(m, false))
		return nil
	}
	var tree any
	dec := json.NewDecoder(strings.NewReader(string(r.JSON)))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return err
	}
	for _, n := range r.Notes {
		if n.standIn != nil {
			if tree, err = setPath(tree, n.Path, n.standIn); err != nil {
				return err
			}
		}
	}
	filled, err := json.Marshal(tree)
	if err != nil {
		return err
	}
	if _, err := manifest.Parse(filled); err != nil {
		r.Problems = dotlab.ErrorDetail(err)
	}
	return nil
}

// setPath sets the value at a JSON path (dotlab.ParseJSONPath's subset) of tree.
func setPath(tree any, at string, v any) (any, error) {
	steps, err := dotlab.ParseJSONPath(at)
	if err != nil {
		return nil, err
	}
	if len(steps) == 0 {
		return v, nil
	}
	node := tree
	for i, st := range steps {
		last := i == len(steps)-1
		switch n := node.(type) {
		case map[string]any:
			if last {
				n[st.Key] = v
			}
			node = n[st.Key]
		case []any:
			if st.Index < 0 || st.Index >= len(n) {
				return nil, fmt.Errorf("%s: no such element", at)
			}
			if last {
				n[st.Index] = v
			}
			node = n[st.Index]
		default:
			return nil, fmt.Errorf("%s: no such field", at)
		}
	}
	return tree, nil
}
