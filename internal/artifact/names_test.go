package artifact

import "testing"

func TestKeyValidate(t *testing.T) {
	tests := []struct {
		name    string
		key     Key
		wantErr bool
	}{
		{name: "program", key: Key{Kind: "program", Namespace: "default", Name: "staticwebsite"}},
		{name: "dotted name", key: Key{Kind: "program", Namespace: "team-a", Name: "web.site-1"}},
		{name: "upper-case kind", key: Key{Kind: "Program", Namespace: "default", Name: "a"}, wantErr: true},
		{name: "empty kind", key: Key{Namespace: "default", Name: "a"}, wantErr: true},
		{name: "empty namespace", key: Key{Kind: "program", Name: "a"}, wantErr: true},
		{name: "dot-dot namespace", key: Key{Kind: "program", Namespace: "..", Name: "a"}, wantErr: true},
		{name: "slash in name", key: Key{Kind: "program", Namespace: "default", Name: "a/b"}, wantErr: true},
		{name: "hidden name", key: Key{Kind: "program", Namespace: "default", Name: ".a"}, wantErr: true},
		{name: "upper-case name", key: Key{Kind: "program", Namespace: "default", Name: "A"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.key.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate(%+v) = %v, want error %v", tt.key, err, tt.wantErr)
			}
		})
	}
}

func TestValidateRevision(t *testing.T) {
	tests := []struct {
		rev     string
		wantErr bool
	}{
		{rev: "1"},
		{rev: "42"},
		{rev: "gen-3"},
		{rev: "v1.2.3_rc"},
		{rev: "", wantErr: true},
		{rev: "..", wantErr: true},
		{rev: ".tmp-abc", wantErr: true},
		{rev: "a/b", wantErr: true},
		{rev: "main@sha1:abc", wantErr: true},
		{rev: string(make([]byte, 129)), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.rev, func(t *testing.T) {
			if err := ValidateRevision(tt.rev); (err != nil) != tt.wantErr {
				t.Errorf("ValidateRevision(%q) = %v, want error %v", tt.rev, err, tt.wantErr)
			}
		})
	}
}

func TestParsePath(t *testing.T) {
	tests := []struct {
		path    string
		wantKey Key
		wantRev string
		wantErr bool
	}{
		{path: "program/default/web/3.tar.gz", wantKey: Key{"program", "default", "web"}, wantRev: "3"},
		{path: Path(Key{"program", "ns", "a.b"}, "gen-7"), wantKey: Key{"program", "ns", "a.b"}, wantRev: "gen-7"},
		{path: "program/default/web/3.tgz", wantErr: true},
		{path: "program/default/web/.tmp-1", wantErr: true},
		{path: "program/default/web/.tar.gz", wantErr: true},
		{path: "program/../web/3.tar.gz", wantErr: true},
		{path: "program/default/../../3.tar.gz", wantErr: true},
		{path: "program/default/web", wantErr: true},
		{path: "program/default/web/x/3.tar.gz", wantErr: true},
		{path: "/program/default/web/3.tar.gz", wantErr: true},
		{path: "program//web/3.tar.gz", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			k, rev, err := parsePath(tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parsePath(%q) error = %v, want error %v", tt.path, err, tt.wantErr)
			}
			if k != tt.wantKey || rev != tt.wantRev {
				t.Errorf("parsePath(%q) = %+v, %q; want %+v, %q", tt.path, k, rev, tt.wantKey, tt.wantRev)
			}
		})
	}
}
