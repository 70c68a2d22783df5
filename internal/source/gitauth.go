package source

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
)

// TokenUsername is the HTTP basic username sent with GitAuth.Token when no
// Username is given. GitHub documents it for installation tokens and accepts
// any username with a personal access token; GitLab accepts any non-empty
// username with a personal, project or group access token. Set
// GitAuth.Username for hosts that insist on another (Bitbucket access tokens
// use "x-token-auth").
const TokenUsername = "x-access-token"

// GitAuth holds the credentials for a git remote. At most one method may be
// used: Token, Username+Password, SSHPrivateKey or GitHubApp.
type GitAuth struct {
	// Token is an access token sent as the HTTP basic password.
	Token string
	// Username is the HTTP basic username for Password, or overrides
	// TokenUsername when used with Token.
	Username string
	// Password is the HTTP basic password used with Username.
	Password string
	// SSHPrivateKey is a PEM or OpenSSH private key, for ssh:// and
	// scp-style URLs.
	SSHPrivateKey string
	// SSHPassphrase decrypts SSHPrivateKey when it is encrypted.
	SSHPassphrase string
	// KnownHosts is known_hosts content trusted to verify the SSH server's
	// host key. When empty the host key is NOT verified, which lets a
	// network attacker impersonate the server; a warning says so.
	KnownHosts string
	// GitHubApp authenticates as a GitHub App installation over HTTPS.
	GitHubApp *GitHubApp
}

// resolvedAuth is what a git operation needs from GitAuth: the go-git auth
// method, warnings to surface, and the secrets to scrub from messages.
type resolvedAuth struct {
	// url is the repository URL to hand to go-git: credentials embedded
	// in an http(s) URL are moved into method, so they are never written
	// to the checkout's .git/config.
	url      string
	method   transport.AuthMethod
	warnings []string
	secrets  redactor
	app      *GitHubApp
}

// settle is called with the outcome of the git operation: a rejected GitHub
// App token is dropped from the cache so the next attempt mints a new one.
func (ra *resolvedAuth) settle(err error) {
	if ra.app != nil && ReasonOf(err) == ReasonAuthFailed {
		ra.app.forget()
	}
}

// resolveAuth checks that a's method fits the endpoint's protocol and turns
// it into a go-git auth method, minting a GitHub App token if needed.
func resolveAuth(ctx context.Context, rawURL string, ep *transport.Endpoint, a *GitAuth) (*resolvedAuth, error) {
	ra := &resolvedAuth{url: rawURL}
	ra.secrets.add(ep.Password)
	var urlUser *neturl.Userinfo
	if ep.Protocol == "http" || ep.Protocol == "https" {
		if u, err := neturl.Parse(rawURL); err == nil && u.User != nil {
			urlUser, u.User = u.User, nil
			ra.url = u.String()
		}
	}
	if a == nil {
		a = &GitAuth{}
	}
	ra.secrets.add(a.Token, a.Password, a.SSHPrivateKey, a.SSHPassphrase)
	if a.GitHubApp != nil {
		ra.secrets.add(a.GitHubApp.PrivateKey)
	}
	methods := 0
	for _, set := range []bool{a.Token != "", a.Password != "", a.SSHPrivateKey != "", a.GitHubApp != nil} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return nil, newError(ReasonInvalidSpec, FieldAuth, nil, "use only one of token, username/password, SSH private key or GitHub App")
	}
	isSSH := ep.Protocol == "ssh"
	httpAuth := a.Token != "" || a.Password != "" || a.GitHubApp != nil
	switch {
	case isSSH && httpAuth:
		return nil, newError(ReasonInvalidSpec, FieldAuth, nil, "token, password and GitHub App credentials need an http(s) URL, not ssh")
	case !isSSH && a.SSHPrivateKey != "":
		return nil, newError(ReasonInvalidSpec, FieldAuth, nil, "an SSH private key needs an ssh:// or user@host:path URL, not %s", ep.Protocol)
	case isSSH && a.SSHPrivateKey == "":
		return nil, newError(ReasonInvalidSpec, FieldSSHPrivateKey, nil, "required for SSH URLs")
	case a.Password != "" && a.Username == "":
		return nil, newError(ReasonInvalidSpec, FieldUsername, nil, "required with a password")
	}

	switch {
	case a.Token != "":
		user := a.Username
		if user == "" {
			user = TokenUsername
		}
		ra.method = &githttp.BasicAuth{Username: user, Password: a.Token}
	case a.Password != "":
		ra.method = &githttp.BasicAuth{Username: a.Username, Password: a.Password}
	case a.GitHubApp != nil:
		tok, err := a.GitHubApp.installationToken(ctx)
		if err != nil {
			return nil, err
		}
		ra.secrets.add(tok)
		ra.app = a.GitHubApp
		ra.method = &githttp.BasicAuth{Username: TokenUsername, Password: tok}
	case urlUser != nil && urlPassword(urlUser) != "":
		ra.method = &githttp.BasicAuth{Username: urlUser.Username(), Password: urlPassword(urlUser)}
	case isSSH:
		m, warn, err := sshAuth(ep, a)
		if err != nil {
			return nil, err
		}
		ra.method = m
		if warn != "" {
			ra.warnings = append(ra.warnings, warn)
		}
	}
	return ra, nil
}

// sshAuth builds public-key auth for an SSH endpoint, with host keys checked
// against a.KnownHosts or, only when none is given, not checked at all.
func sshAuth(ep *transport.Endpoint, a *GitAuth) (transport.AuthMethod, string, error) {
	signer, err := parseSSHKey(a.SSHPrivateKey, a.SSHPassphrase)
	if err != nil {
		return nil, "", err
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	pk := &gitssh.PublicKeys{User: user, Signer: signer}
	port := ep.Port
	if port == 0 {
		port = 22
	}
	hostPort := net.JoinHostPort(ep.Host, strconv.Itoa(port))
	if a.KnownHosts == "" {
		pk.HostKeyCallback = ssh.InsecureIgnoreHostKey() //nolint:gosec // only without known hosts, and the caller reports that the host key is not verified
		return pk, fmt.Sprintf("no known hosts given: the SSH host key of %s is NOT verified, so the connection is open to impersonation", hostPort), nil
	}
	db, err := knownHostsDB(a.KnownHosts)
	if err != nil {
		return nil, "", err
	}
	pk.HostKeyCallback = db.HostKeyCallback()
	pk.HostKeyAlgorithms = db.HostKeyAlgorithms(hostPort)
	return pk, "", nil
}

// parseSSHKey decodes a private key, decrypting it with passphrase when it
// is encrypted. Errors never quote the key or the passphrase.
func parseSSHKey(key, passphrase string) (ssh.Signer, error) {
	signer, err := ssh.ParsePrivateKey([]byte(key))
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		if passphrase == "" {
			return nil, newError(ReasonInvalidSpec, FieldSSHPassphrase, nil, "required: the SSH private key is encrypted")
		}
		signer, err = ssh.ParsePrivateKeyWithPassphrase([]byte(key), []byte(passphrase))
		if errors.Is(err, x509.IncorrectPasswordError) {
			return nil, newError(ReasonAuthFailed, FieldSSHPassphrase, nil, "does not decrypt the SSH private key")
		}
	}
	if err != nil {
		// The parser's message names only the format problem; still, do
		// not echo it in case a future version quotes input.
		return nil, newError(ReasonInvalidSpec, FieldSSHPrivateKey, nil, "not a valid PEM or OpenSSH private key")
	}
	return signer, nil
}

// knownHostsDB parses known_hosts content. The parser only reads files, so
// the content goes through a short-lived temporary file.
func knownHostsDB(content string) (*knownhosts.HostKeyDB, error) {
	f, err := os.CreateTemp("", "stackyard-known-hosts-")
	if err != nil {
		return nil, newError(ReasonInternal, FieldKnownHosts, err, "%v", err)
	}
	defer os.Remove(f.Name())
	_, werr := f.WriteString(content)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		return nil, newError(ReasonInternal, FieldKnownHosts, errors.Join(werr, cerr), "writing a temporary file failed")
	}
	db, err := knownhosts.NewDB(f.Name())
	if err != nil {
		return nil, newError(ReasonInvalidSpec, FieldKnownHosts, err, "not valid known_hosts content: %v", err)
	}
	return db, nil
}

// urlPassword returns the password of URL user info, or "".
func urlPassword(u *neturl.Userinfo) string {
	p, _ := u.Password()
	return p
}
