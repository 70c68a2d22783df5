package change

import (
	"errors"
	"strings"
	"testing"

	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/source"
)

// TestAuthFromSecret picks a Pipeline's credentials out of its Secret, and
// names the field, without a value, when none is usable.
func TestAuthFromSecret(t *testing.T) {
	tests := []struct {
		name string
		data map[string]string
		want source.GitAuth
	}{
		{name: "basic", data: map[string]string{"username": "u", "password": "p"}, want: source.GitAuth{Username: "u", Password: "p"}},
		{name: "token", data: map[string]string{"accessToken": "t"}, want: source.GitAuth{Token: "t"}},
		{name: "token with a user name", data: map[string]string{"accessToken": "t", "username": "x-token-auth"}, want: source.GitAuth{Token: "t", Username: "x-token-auth"}},
		{name: "ssh key first", data: map[string]string{"sshPrivateKey": "k", "password": "pp", "knownHosts": "h", "accessToken": "t"},
			want: source.GitAuth{SSHPrivateKey: "k", SSHPassphrase: "pp", KnownHosts: "h"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range tt.data {
				data[k] = []byte(v)
			}
			got, err := authFromSecret("creds", data)
			if err != nil || got == nil || *got != tt.want {
				t.Errorf("authFromSecret = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	// An SSH key without known hosts: the server's host key could not be
	// verified, and a Pipeline's reads become releases.
	_, err := authFromSecret("creds", map[string][]byte{"sshPrivateKey": []byte("s3cret-key")})
	var unverified *sreconcile.Waiting
	if !errors.As(err, &unverified) || !strings.HasPrefix(err.Error(), `spec.git.secretRef: Secret "creds" has sshPrivateKey but no knownHosts`) ||
		strings.Contains(err.Error(), "s3cret") {
		t.Errorf("an SSH key without known hosts: %v, want a wait naming spec.git.secretRef and knownHosts", err)
	}
	_, err = authFromSecret("creds", map[string][]byte{"username": []byte("only-a-name"), "note": []byte("s3cret")})
	var w *sreconcile.Waiting
	if !errors.As(err, &w) || !w.Bounded || !strings.HasPrefix(err.Error(), `spec.git.secretRef: Secret "creds" has none of the keys`) ||
		strings.Contains(err.Error(), "s3cret") {
		t.Errorf("no usable key: %v, want a bounded wait naming spec.git.secretRef", err)
	}
}
