package sandbox

import (
	"slices"
	"testing"
)

func TestEnvSetsPackageEnvOverTheImageOnly(t *testing.T) {
	seed := int64(7)
	s := Spec{
		ImageEnv: []string{"PATH=/opt/bin:/usr/bin", "TZ=America/New_York", "OMP_NUM_THREADS=8", "R_HOME=/usr/lib/R"},
		Seed:     &seed,
		// The manifest checker refuses HOME, PATH and DOTLAB_*; the sandbox
		// does not let them through either.
		PackageEnv: map[string]string{"TZ": "UTC", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "HOME": "/work/code", "PATH": "/work/code", "DOTLAB_SEED": "1"},
	}
	got := s.Env()
	want := []string{"PATH=/opt/bin:/usr/bin", "R_HOME=/usr/lib/R", "MPLBACKEND=Agg", "OMP_NUM_THREADS=1", "TZ=UTC",
		"HOME=/tmp", "TMPDIR=/tmp", "LANG=C.UTF-8", "DOTLAB_DATA_DIR=/work/data", "DOTLAB_OUT_DIR=/work/out", "DOTLAB_SEED=7"}
	if !slices.Equal(got, want) {
		t.Fatalf("Env() =\n%q\nwant\n%q", got, want)
	}
}
