package stack_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// pathProgram is a Pulumi YAML project that writes "deployed" to the file
// its config value `path` names, so that stacks sharing one repository
// each write their own file.
const pathProgram = `name: private
runtime: yaml
config:
  path:
    type: string
resources:
  page:
    type: stackyardtest:index:File
    properties:
      path: ${path}
      content: deployed
`

// The credentials the git server accepts.
const (
	gitUser     = "alice"
	gitPassword = "basic-password-1"
	gitToken    = "token-value-1"
)

// TestGitAuthVariants deploys a program from a git server that refuses
// anonymous clients, once per way a Stack can give credentials: basicAuth,
// accessToken, the deprecated gitAuthSecret, and an SSH key. The operator
// polls the branch and the agent fetches it, both with those credentials.
// A wrong password stalls the Stack with SourceUnavailable, naming the
// field and never the password; fixing the Secret is enough to deploy it
// (the source is tried again every resync interval).
func TestGitAuthVariants(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)

	srv := gitserver.New(t)
	srv.SetAuthFunc(func(u, p string, ok bool) bool {
		return ok && ((u == gitUser && p == gitPassword) || p == gitToken)
	})
	key, pub := sshKey(t)
	neverLogged(gitPassword, gitToken, "not-the-password", strings.Split(key, "\n")[1])
	sshSrv := srv.StartSSH(pub)
	srv.CreateRepo("private").Commit("main", map[string]string{"Pulumi.yaml": pathProgram})
	httpURL := srv.RepoURL("private")

	secret := func(name string, data map[string]string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}
	secret("basic", map[string]string{"user": gitUser, "password": gitPassword})
	secret("token", map[string]string{"token": gitToken})
	secret("legacy", map[string]string{"accessToken": gitToken})
	secret("ssh", map[string]string{"key": key})
	secret("wrong", map[string]string{"user": gitUser, "password": "not-the-password"})

	ref := shared.NewSecretResourceRef
	stacks := map[string]*shared.GitSource{
		"basic": {ProjectRepo: httpURL, Branch: "main", GitAuth: &shared.GitAuthConfig{
			BasicAuth: &shared.BasicAuth{UserName: ref("basic", "user"), Password: ref("basic", "password")}}},
		"token": {ProjectRepo: httpURL, Branch: "main", GitAuth: &shared.GitAuthConfig{
			PersonalAccessToken: ptr.To(ref("token", "token"))}},
		"legacy": {ProjectRepo: httpURL, Branch: "main", GitAuthSecret: "legacy"},
		"ssh": {ProjectRepo: sshSrv.RepoURL("private"), Branch: "main", GitAuth: &shared.GitAuthConfig{
			SSHAuth: &shared.SSHAuth{SSHPrivateKey: ref("ssh", "key")}}},
		"wrong": {ProjectRepo: httpURL, Branch: "main", GitAuth: &shared.GitAuthConfig{
			BasicAuth: &shared.BasicAuth{UserName: ref("wrong", "user"), Password: ref("wrong", "password")}}},
	}
	// They poll every second: stop them when done, the namespace stays.
	t.Cleanup(func() {
		_ = env.Client.DeleteAllOf(context.Background(), &pulumiv1.Stack{}, client.InNamespace(ns))
	})
	targets := map[string]string{}
	for name, src := range stacks {
		targets[name] = filepath.Join(dir, name+".txt")
		s := &pulumiv1.Stack{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: shared.StackSpec{
				Stack:                  "dev",
				Backend:                backendURL(t, filepath.Join(dir, name)),
				GitSource:              src,
				ResyncFrequencySeconds: 1,
				Config: map[string]apiextensionsv1.JSON{
					"private:path": {Raw: []byte(fmt.Sprintf("%q", targets[name]))},
				},
			},
		}
		g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	}

	for _, name := range []string{"basic", "token", "legacy", "ssh"} {
		waitStack(t, ns, name, opTimeout, ready)
		g.Expect(readFile(g, targets[name])).To(Equal("deployed"), name)
	}

	s := waitStack(t, ns, "wrong", opTimeout, func(g Gomega, s *pulumiv1.Stack) {
		c := findCondition(s, sreconcile.StalledCondition)
		g.Expect(c).NotTo(BeNil(), "not stalled")
		g.Expect(c.Reason).To(Equal(pulumiv1.StalledSourceUnavailableReason))
		g.Expect(c.Message).To(ContainSubstring("spec.gitAuth: AuthFailed"))
	})
	g.Expect(describe(s)).NotTo(ContainSubstring("not-the-password"))
	g.Expect(s.Status.LastUpdate).To(BeNil(), "nothing ran")

	var wrong corev1.Secret
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wrong"}, &wrong)).To(Succeed())
	wrong.Data["password"] = []byte(gitPassword)
	g.Expect(env.Client.Update(ctx, &wrong)).To(Succeed())
	// Nothing wakes the Stack when its Secret changes; it tries its
	// source again every resync interval.
	waitStack(t, ns, "wrong", opTimeout, ready)
	g.Expect(readFile(g, targets["wrong"])).To(Equal("deployed"))
}

// sshKey makes an SSH key pair: the private key in OpenSSH PEM form, as a
// Secret holds it, and the public key the server authorises.
func sshKey(t *testing.T) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block)), sshPub
}
