package stack_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/test/gitserver"
	"github.com/stackyard/stackyard/test/testenv"
)

// TestHandWrittenWorkspaceAndUpdates uses the operator without a Stack, as
// its documentation allows: a Workspace written by hand (program from a
// git branch, backend from its environment, one stack with config) and
// Updates written by hand. The Workspace controller fetches the program,
// starts the agent and sets the stack up; the Update controller runs an up
// in it, which deploys the program with the config and writes the outputs
// Secret, then a destroy, which removes what the up made. Each controller
// acts on the status the other one wrote, not on a status written by the
// test, as in the two controllers' own suites.
func TestHandWrittenWorkspaceAndUpdates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	dir := testenv.LiveDir(t)
	target := filepath.Join(dir, "page.txt")
	repo := gitserver.New(t).CreateRepo("web")
	repo.Commit("main", map[string]string{"Pulumi.yaml": program(target, false)})

	g.Expect(env.Client.Create(ctx, &autov1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: "handmade", Namespace: ns},
		Spec: autov1alpha1.WorkspaceSpec{
			Git: &autov1alpha1.GitSource{URL: repo.URL, Ref: "main"},
			Env: []corev1.EnvVar{{Name: "PULUMI_BACKEND_URL", Value: backendURL(t, dir)}},
			Stacks: []autov1alpha1.WorkspaceStack{{
				Name:   "dev",
				Create: ptr.To(true),
				Config: []autov1alpha1.ConfigItem{{Key: "web:message", Value: &apiextensionsv1.JSON{Raw: []byte(`"written by hand"`)}}},
			}},
		},
	})).To(Succeed())

	up := runUpdate(t, ns, "handmade-up", autov1alpha1.UpType)
	g.Expect(readFile(g, target)).To(Equal("written by hand"))
	g.Expect(up.Status.ProjectInfo).To(Equal(&autov1alpha1.ProjectInfo{Name: "web", Runtime: "yaml"}))
	g.Expect(up.Status.Changes).To(HaveKeyWithValue("create", BeNumerically(">=", 3)))

	var outputs corev1.Secret
	g.Expect(up.Status.Outputs).NotTo(BeEmpty())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: up.Status.Outputs}, &outputs)).To(Succeed())
	sum := sha256.Sum256([]byte("written by hand"))
	g.Expect(string(outputs.Data["sha"])).To(Equal(fmt.Sprintf("%q", hex.EncodeToString(sum[:]))))
	var token string
	g.Expect(json.Unmarshal(outputs.Data["secretToken"], &token)).To(Succeed())
	g.Expect(token).To(HaveLen(8))
	g.Expect(outputs.Annotations[autov1alpha1.SecretOutputsAnnotation]).To(MatchJSON(`["secretToken"]`))

	// The Workspace controller, not the test, says the Workspace is set up.
	var ws autov1alpha1.Workspace
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "handmade"}, &ws)).To(Succeed())
	g.Expect(ws.Status.IsReady()).To(BeTrue())
	g.Expect(ws.Status.ObservedGeneration).To(Equal(ws.Generation))
	// Nothing but the two objects drove the operation.
	var stacks pulumiv1.StackList
	g.Expect(env.Client.List(ctx, &stacks, client.InNamespace(ns))).To(Succeed())
	g.Expect(stacks.Items).To(BeEmpty())

	runUpdate(t, ns, "handmade-destroy", autov1alpha1.DestroyType)
	_, err := os.Stat(target)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the destroy must have removed the file")
}

// runUpdate creates the Update name, of type typ, on stack "dev" of the
// Workspace "handmade", waits for it to complete, and fails unless it
// succeeded.
func runUpdate(t *testing.T, ns, name string, typ autov1alpha1.UpdateType) *autov1alpha1.Update {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	u := &autov1alpha1.Update{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       autov1alpha1.UpdateSpec{WorkspaceName: "handmade", StackName: "dev", Type: typ},
	}
	g.Expect(env.Client.Create(ctx, u)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), u)).To(Succeed())
		g.Expect(u.Status.IsComplete()).To(BeTrue(), "not complete")
	}, opTimeout, 250*time.Millisecond).Should(Succeed(), func() string { return fmt.Sprintf("%+v", u.Status) })
	g.Expect(u.Status.IsFailed()).To(BeFalse(), u.Status.Message)
	g.Expect(apimeta.FindStatusCondition(u.Status.Conditions, autov1alpha1.UpdateConditionTypeComplete)).
		To(HaveField("Reason", autov1alpha1.UpdateReasonSucceeded))
	g.Expect(u.Status.StartTime.IsZero()).To(BeFalse(), "the Update controller records when the operation started")
	return u
}
