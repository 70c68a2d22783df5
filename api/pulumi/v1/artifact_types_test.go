package v1

import "testing"

func TestArtifactPredicates(t *testing.T) {
	var none *Artifact
	a := &Artifact{Revision: "main@sha1:abc", Digest: "sha256:def"}
	tests := []struct {
		name string
		got  bool
		want bool
	}{
		{"nil artifact has no revision", none.HasRevision(""), false},
		{"nil artifact has no digest", none.HasDigest(""), false},
		{"same revision", a.HasRevision("main@sha1:abc"), true},
		{"other revision", a.HasRevision("main@sha1:xyz"), false},
		{"same digest", a.HasDigest("sha256:def"), true},
		{"other digest", a.HasDigest("sha256:000"), false},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
