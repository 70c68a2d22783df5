package source

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/stackyard/stackyard/test/gitserver"
)

func TestFetchGitHTTPAuth(t *testing.T) {
	const (
		user     = "alice"
		password = "correct-horse-battery-staple"
		token    = "glpat-0123456789abcdefTOKEN"
	)
	srv := gitserver.New(t)
	p := newProgramRepo(t, srv, "private")
	srv.SetAuthFunc(func(u, pw string, ok bool) bool {
		return ok && ((u == user && pw == password) || (u == TokenUsername && pw == token))
	})
	ctx, logs := loggingContext()
	t.Cleanup(func() {
		if strings.Contains(logs.String(), password) || strings.Contains(logs.String(), token) {
			t.Errorf("logs leak a secret:\n%s", logs)
		}
		if !strings.Contains(logs.String(), "fetched git source") {
			t.Errorf("expected debug logs, got:\n%s", logs)
		}
	})
	userURL := strings.Replace(p.repo.URL, "http://", "http://"+user+":"+password+"@", 1)
	wrongURL := strings.Replace(p.repo.URL, "http://", "http://"+user+":wrong-"+password+"@", 1)

	tests := []struct {
		name   string
		url    string
		auth   *GitAuth
		reason Reason // "" means success
	}{
		{name: "basic auth", auth: &GitAuth{Username: user, Password: password}},
		{name: "token", auth: &GitAuth{Token: token}},
		{name: "credentials in URL", url: userURL},
		{name: "wrong password", auth: &GitAuth{Username: user, Password: "wrong-" + password}, reason: ReasonAuthFailed},
		{name: "wrong token", auth: &GitAuth{Token: "wrong-" + token}, reason: ReasonAuthFailed},
		{name: "token with wrong username", auth: &GitAuth{Token: token, Username: "bob"}, reason: ReasonAuthFailed},
		{name: "wrong password in URL", url: wrongURL, reason: ReasonAuthFailed},
		{name: "no credentials", reason: ReasonAuthFailed},
		{name: "two methods", auth: &GitAuth{Token: token, Username: user, Password: password}, reason: ReasonInvalidSpec},
		{name: "password without username", auth: &GitAuth{Password: password}, reason: ReasonInvalidSpec},
		{name: "ssh key on http URL", auth: &GitAuth{SSHPrivateKey: "key"}, reason: ReasonInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := tt.url
			if url == "" {
				url = p.repo.URL
			}
			spec := GitSpec{URL: url, Branch: "main", Auth: tt.auth}
			res, err := FetchGit(ctx, filepath.Join(t.TempDir(), "src"), spec)
			_, lsErr := LsRemote(ctx, url, "main", tt.auth)
			for _, err := range []error{err, lsErr} {
				assertNoSecrets(t, err, password, "wrong-"+password, token, "wrong-"+token)
				if err != nil {
					assertNoSecrets(t, fmt.Errorf("%+v", err), password, token)
				}
			}
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("FetchGit: %v", err)
				}
				if lsErr != nil {
					t.Fatalf("LsRemote: %v", lsErr)
				}
				if res.Commit != p.main {
					t.Errorf("commit = %s, want %s", res.Commit, p.main)
				}
				if cfg := readFile(t, res.Dir, ".git/config"); strings.Contains(cfg, password) || strings.Contains(cfg, token) {
					t.Errorf(".git/config stores credentials:\n%s", cfg)
				}
				return
			}
			t.Logf("error: %v", err)
			if e := wantReason(t, err, tt.reason); !e.Permanent {
				t.Errorf("%s should be permanent", tt.reason)
			}
			wantReason(t, lsErr, tt.reason)
		})
	}
}

func TestFetchGitSSH(t *testing.T) {
	clientKey, clientPub := newSSHKey(t)
	srv := gitserver.New(t)
	p := newProgramRepo(t, srv, "app")
	sshSrv := srv.StartSSH(clientPub)
	url := sshSrv.RepoURL("app")
	_, otherPub := newSSHKey(t)
	otherHost := sshSrv.KnownHosts()[:strings.Index(sshSrv.KnownHosts(), " ")] + " " + string(ssh.MarshalAuthorizedKey(otherPub))

	const passphrase = "open sesame, please"
	plainPEM := marshalSSHKey(t, clientKey, "")
	encPEM := marshalSSHKey(t, clientKey, passphrase)
	strangerPEM := marshalSSHKey(t, mustKey(newSSHKey(t)), "")

	tests := []struct {
		name        string
		auth        *GitAuth
		reason      Reason
		wantWarning bool
	}{
		{name: "key and known_hosts", auth: &GitAuth{SSHPrivateKey: plainPEM, KnownHosts: sshSrv.KnownHosts()}},
		{name: "encrypted key", auth: &GitAuth{SSHPrivateKey: encPEM, SSHPassphrase: passphrase, KnownHosts: sshSrv.KnownHosts()}},
		{name: "no known_hosts is insecure but works", auth: &GitAuth{SSHPrivateKey: plainPEM}, wantWarning: true},
		{name: "wrong host key", auth: &GitAuth{SSHPrivateKey: plainPEM, KnownHosts: otherHost}, reason: ReasonAuthFailed},
		{name: "unauthorised key", auth: &GitAuth{SSHPrivateKey: strangerPEM, KnownHosts: sshSrv.KnownHosts()}, reason: ReasonAuthFailed},
		{name: "wrong passphrase", auth: &GitAuth{SSHPrivateKey: encPEM, SSHPassphrase: "nope", KnownHosts: sshSrv.KnownHosts()}, reason: ReasonAuthFailed},
		{name: "missing passphrase", auth: &GitAuth{SSHPrivateKey: encPEM, KnownHosts: sshSrv.KnownHosts()}, reason: ReasonInvalidSpec},
		{name: "no key", auth: nil, reason: ReasonInvalidSpec},
		{name: "token on ssh URL", auth: &GitAuth{Token: "abcdefgh"}, reason: ReasonInvalidSpec},
	}
	ctx, logs := loggingContext()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := FetchGit(ctx, filepath.Join(t.TempDir(), "src"), GitSpec{URL: url, Branch: "main", Shallow: true, Auth: tt.auth})
			assertNoSecrets(t, err, passphrase, plainPEM, encPEM, strangerPEM)
			if tt.reason != "" {
				t.Logf("error: %v", err)
				wantReason(t, err, tt.reason)
				return
			}
			if err != nil {
				t.Fatalf("FetchGit: %v", err)
			}
			if res.Commit != p.main {
				t.Errorf("commit = %s, want %s", res.Commit, p.main)
			}
			if got := len(res.Warnings) > 0; got != tt.wantWarning {
				t.Errorf("warnings = %v, want warning: %v", res.Warnings, tt.wantWarning)
			}
			sha, err := LsRemote(ctx, url, "feature", tt.auth)
			if err != nil || sha != p.feature {
				t.Errorf("LsRemote = %s, %v; want %s", sha, err, p.feature)
			}
		})
	}
	if !strings.Contains(logs.String(), "NOT verified") {
		t.Errorf("missing insecure host key warning in logs:\n%s", logs)
	}
	for _, secret := range []string{passphrase, strings.Split(plainPEM, "\n")[1]} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("logs leak a secret:\n%s", logs)
		}
	}
}

func TestParseSSHKey(t *testing.T) {
	key, pub := newSSHKey(t)
	enc := marshalSSHKey(t, key, "s3cret-passphrase")
	if s, err := parseSSHKey(enc, "s3cret-passphrase"); err != nil || string(s.PublicKey().Marshal()) != string(pub.Marshal()) {
		t.Fatalf("right passphrase: %v", err)
	}
	if _, err := parseSSHKey(marshalSSHKey(t, key, ""), "ignored"); err != nil {
		t.Fatalf("passphrase given for a plain key should be ignored: %v", err)
	}
	e := wantReason(t, mustErr(parseSSHKey(enc, "wrong")), ReasonAuthFailed)
	if e.Field != FieldSSHPassphrase {
		t.Errorf("field = %q", e.Field)
	}
	wantReason(t, mustErr(parseSSHKey(enc, "")), ReasonInvalidSpec)
	e = wantReason(t, mustErr(parseSSHKey("-----BEGIN OPENSSH PRIVATE KEY-----\nsecretgarbage\n-----END OPENSSH PRIVATE KEY-----\n", "")), ReasonInvalidSpec)
	assertNoSecrets(t, e, "secretgarbage")
}

// newSSHKey returns a fresh ed25519 key pair.
func newSSHKey(t *testing.T) (ed25519.PrivateKey, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return priv, sp
}

// mustKey drops the public half of newSSHKey's result.
func mustKey(k ed25519.PrivateKey, _ ssh.PublicKey) ed25519.PrivateKey { return k }

// mustErr drops the value half of a (value, error) result.
func mustErr[T any](_ T, err error) error { return err }

// marshalSSHKey encodes key in OpenSSH format, encrypted when passphrase is
// not empty.
func marshalSSHKey(t *testing.T, key ed25519.PrivateKey, passphrase string) string {
	t.Helper()
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(key, "test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(key, "test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block))
}
