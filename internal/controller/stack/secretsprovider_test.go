package stack_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackyard/stackyard/api/pulumi/shared"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestSecretsProviderFromEnvRef names the passphrase secrets provider
// explicitly and gives the stack its own passphrase through an envRef
// Secret, overriding the one every agent of the operator gets. The state's
// secrets can then be read with the Stack's passphrase and not with the
// operator's, which shows that the stack was created with the provider and
// passphrase its spec names.
func TestSecretsProviderFromEnvRef(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s, target := newFileStack(t, "sealed", webProgram)
	ns, dir, backend := s.Namespace, filepath.Dir(target), s.Spec.Backend
	const own = "the stack's own passphrase"
	neverLogged(own)

	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "passphrase", Namespace: ns},
		StringData: map[string]string{"value": own},
	})).To(Succeed())
	s.Spec.SecretsProvider = "passphrase"
	s.Spec.Config = config("sealed")
	s.Spec.EnvRefs = map[string]shared.ResourceRef{
		"PULUMI_CONFIG_PASSPHRASE": shared.NewSecretResourceRef("passphrase", "value"),
	}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	waitStack(t, ns, "sealed", opTimeout, ready)

	export := func(passphrase string) (string, error) {
		cmd := exec.Command(filepath.Join(testenv.BinDir(), "pulumi"), "stack", "export", "--show-secrets", "--stack", "organization/web/dev")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PULUMI_BACKEND_URL="+backend, "PULUMI_CONFIG_PASSPHRASE="+passphrase)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := export(own)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring(`"type": "passphrase"`))
	out, err = export(passphrase)
	g.Expect(err).To(HaveOccurred(), "the operator's passphrase must not open this stack's secrets:\n%s", out)
	g.Expect(out).To(ContainSubstring("incorrect passphrase"))
}
