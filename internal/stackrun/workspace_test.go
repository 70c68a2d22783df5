package stackrun

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
)

func testStack(mut func(*shared.StackSpec)) *pulumiv1.Stack {
	s := &pulumiv1.Stack{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"},
		Spec:       shared.StackSpec{Stack: "org/web/dev", ServiceAccountName: "pulumi"},
	}
	if mut != nil {
		mut(&s.Spec)
	}
	return s
}

func envByName(ws *autov1alpha1.Workspace, name string) *corev1.EnvVar {
	for i := range ws.Spec.Env {
		if ws.Spec.Env[i].Name == name {
			return &ws.Spec.Env[i]
		}
	}
	return nil
}

func TestBuildWorkspaceBasics(t *testing.T) {
	g := NewWithT(t)
	git := &autov1alpha1.GitSource{URL: "https://example.invalid/r.git", Ref: "abc", Dir: "infra"}
	ws, err := BuildWorkspace(testStack(func(s *shared.StackSpec) {
		s.Backend = "file:///state"
		s.UseLocalStackOnly = true
		s.SecretsProvider = "passphrase"
		s.Environment = []string{"aws-creds"}
		s.Envs = []string{"cm-env"}
		s.SecretEnvs = []string{"secret-env"}
		s.AccessTokenSecret = "token-secret"
	}), Source{Git: git, Revision: "abc"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ws.Name).To(Equal("web"))
	g.Expect(ws.Namespace).To(Equal("apps"))
	g.Expect(ws.Labels).To(HaveKeyWithValue(StackNameLabel, "web"))
	g.Expect(ws.Spec.ServiceAccountName).To(Equal("pulumi"))
	g.Expect(ws.Spec.Git).To(Equal(git))
	g.Expect(envByName(ws, "PULUMI_BACKEND_URL").Value).To(Equal("file:///state"))
	g.Expect(envByName(ws, "PULUMI_ACCESS_TOKEN").ValueFrom.SecretKeyRef.Name).To(Equal("token-secret"))
	g.Expect(ws.Spec.EnvFrom).To(HaveLen(2))
	g.Expect(ws.Spec.Stacks).To(HaveLen(1))
	st := ws.Spec.Stacks[0]
	g.Expect(st.Name).To(Equal("org/web/dev"))
	g.Expect(*st.Create).To(BeFalse(), "useLocalStackOnly means the stack must already exist")
	g.Expect(*st.SecretsProvider).To(Equal("passphrase"))
	g.Expect(st.Environment).To(Equal([]string{"aws-creds"}))
}

func TestBuildWorkspaceConfigAndSecrets(t *testing.T) {
	g := NewWithT(t)
	ws, err := BuildWorkspace(testStack(func(s *shared.StackSpec) {
		s.Config = map[string]apiextensionsv1.JSON{
			"aws:region": {Raw: []byte(`"us-east-1"`)},
			"app:sizes":  {Raw: []byte(`{"web":2}`)},
		}
		s.ConfigRef = map[string]shared.ConfigMapRef{"app:flags": {Name: "cm", Key: "flags", JSON: ptr.To(true)}}
		s.Secrets = map[string]string{"app:legacy": "hunter2"}
		s.SecretRefs = map[string]shared.ResourceRef{
			"app:password": shared.NewSecretResourceRef("db", "password"),
			"app:literal":  shared.NewLiteralResourceRef("s3cret"),
			"app:fromEnv":  shared.NewEnvResourceRef("HOME"),
			"app:fromFile": shared.NewFileSystemResourceRef("/var/run/x"),
		}
		s.EnvRefs = map[string]shared.ResourceRef{
			"LITERAL":             shared.NewLiteralResourceRef("v"),
			"PULUMI_ACCESS_TOKEN": shared.NewSecretResourceRef("pulumi", "accessToken"),
		}
	}), Source{})
	g.Expect(err).NotTo(HaveOccurred())
	items := map[string]autov1alpha1.ConfigItem{}
	for _, item := range ws.Spec.Stacks[0].Config {
		items[item.Key] = item
	}
	g.Expect(items).To(HaveLen(8))
	g.Expect(string(items["aws:region"].Value.Raw)).To(Equal(`"us-east-1"`))
	g.Expect(string(items["app:sizes"].Value.Raw)).To(Equal(`{"web":2}`))
	g.Expect(items["app:flags"].ValueFrom.JSON).To(BeTrue())
	g.Expect(*items["app:legacy"].Secret).To(BeTrue())
	g.Expect(*items["app:literal"].Secret).To(BeTrue())
	g.Expect(items["app:fromEnv"].ValueFrom.Env).To(Equal("HOME"))
	g.Expect(items["app:fromFile"].ValueFrom.Path).To(Equal("/var/run/x"))

	// A Secret-backed value reaches the agent through an env var reading
	// the Secret; the Workspace never holds the value itself.
	pw := items["app:password"]
	g.Expect(*pw.Secret).To(BeTrue())
	env := envByName(ws, pw.ValueFrom.Env)
	g.Expect(env).NotTo(BeNil())
	g.Expect(env.ValueFrom.SecretKeyRef.Name).To(Equal("db"))
	g.Expect(env.ValueFrom.SecretKeyRef.Key).To(Equal("password"))
	g.Expect(envByName(ws, "LITERAL").Value).To(Equal("v"))
	g.Expect(envByName(ws, "PULUMI_ACCESS_TOKEN").ValueFrom.SecretKeyRef.Name).To(Equal("pulumi"))

	raw, _ := json.Marshal(ws)
	g.Expect(string(raw)).NotTo(ContainSubstring("password\":\"")) // no Secret value, only references
}

func TestBuildWorkspaceRefusals(t *testing.T) {
	tests := []struct {
		name  string
		mut   func(*shared.StackSpec)
		field string
	}{{
		name: "env ref of type FS",
		mut: func(s *shared.StackSpec) {
			s.EnvRefs = map[string]shared.ResourceRef{"X": shared.NewFileSystemResourceRef("/x")}
		},
		field: "spec.envRefs[X]",
	}, {
		name: "secret in another namespace",
		mut: func(s *shared.StackSpec) {
			ref := shared.NewSecretResourceRef("s", "k")
			ref.SecretRef.Namespace = "kube-system"
			s.SecretRefs = map[string]shared.ResourceRef{"app:x": ref}
		},
		field: "spec.secretsRef[app:x].secret.namespace",
	}, {
		name: "a key in config and secretsRef",
		mut: func(s *shared.StackSpec) {
			s.Config = map[string]apiextensionsv1.JSON{"app:x": {Raw: []byte(`"a"`)}}
			s.SecretRefs = map[string]shared.ResourceRef{"app:x": shared.NewSecretResourceRef("s", "k")}
		},
		field: "spec.secretsRef[app:x]: the key is also set in spec.config",
	}, {
		name: "a key in configRef and secrets (stored before admission checked it)",
		mut: func(s *shared.StackSpec) {
			s.ConfigRef = map[string]shared.ConfigMapRef{"app:y": {Name: "cm", Key: "y"}}
			s.Secrets = map[string]string{"app:y": "b"}
		},
		field: "spec.secrets[app:y]: the key is also set in spec.configRef",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := BuildWorkspace(testStack(tt.mut), Source{})
			g.Expect(err).To(HaveOccurred())
			g.Expect(sreconcile.Reason(err)).To(Equal(pulumiv1.StalledSpecInvalidReason))
			g.Expect(err.Error()).To(ContainSubstring(tt.field))
		})
	}
}

func TestBuildWorkspaceTemplateMerges(t *testing.T) {
	g := NewWithT(t)
	ws, err := BuildWorkspace(testStack(func(s *shared.StackSpec) {
		s.Backend = "file:///state"
		s.WorkspaceTemplate = &autov1alpha1.WorkspaceTemplate{
			Metadata: &autov1alpha1.EmbeddedObjectMeta{Labels: map[string]string{"team": "infra", StackNameLabel: "spoofed"}},
			Spec: &autov1alpha1.WorkspaceSpecTemplate{
				Image: ptr.To("pulumi/pulumi:3.134.1-nonroot"),
				Env:   []corev1.EnvVar{{Name: "EXTRA", Value: "1"}, {Name: "PULUMI_BACKEND_URL", Value: "s3://b"}},
			},
		}
	}), Source{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ws.Spec.Image).To(Equal("pulumi/pulumi:3.134.1-nonroot"))
	g.Expect(envByName(ws, "EXTRA").Value).To(Equal("1"))
	g.Expect(envByName(ws, "PULUMI_BACKEND_URL").Value).To(Equal("s3://b"), "env merges by name: the template wins")
	g.Expect(ws.Labels).To(HaveKeyWithValue("team", "infra"))
	g.Expect(ws.Labels).To(HaveKeyWithValue(StackNameLabel, "web"), "the template cannot relabel the Stack's Workspace")
	g.Expect(ws.Spec.Stacks).To(HaveLen(1), "stacks survive a template that does not mention them")
}

// TestBuildWorkspacePodTemplateWithoutContainers: a template that sets only
// the pod's securityContext gives a Workspace the API server accepts (no
// "containers: null").
func TestBuildWorkspacePodTemplateWithoutContainers(t *testing.T) {
	g := NewWithT(t)
	ws, err := BuildWorkspace(testStack(func(s *shared.StackSpec) {
		s.WorkspaceTemplate = &autov1alpha1.WorkspaceTemplate{Spec: &autov1alpha1.WorkspaceSpecTemplate{
			PodTemplate: &autov1alpha1.PodTemplateOverlay{Spec: &apiextensionsv1.JSON{Raw: []byte(`{"securityContext":{"runAsUser":65532}}`)}},
		}}
	}), Source{})
	g.Expect(err).NotTo(HaveOccurred())
	data, err := json.Marshal(ws.Spec.PodTemplate)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(ContainSubstring(`"containers":[]`))
	g.Expect(*ws.Spec.PodTemplate.Spec.SecurityContext.RunAsUser).To(Equal(int64(65532)))
}

func TestEnvSafeNamesDoNotCollide(t *testing.T) {
	b := &workspaceBuilder{ws: &autov1alpha1.Workspace{}}
	a := b.refEnv("SECRETREF", "app:db", corev1.EnvVarSource{})
	c := b.refEnv("SECRETREF", "app.db", corev1.EnvVarSource{})
	if a == c || !strings.HasPrefix(a, "STACKYARD_SECRETREF_APP_DB_") {
		t.Errorf("got %q and %q", a, c)
	}
}

// TestBuildWorkspaceEnvRefsOverrideDeprecatedFields keeps one variable per
// name (the API server refuses duplicates): envRefs wins over backend and
// accessTokenSecret.
func TestBuildWorkspaceEnvRefsOverrideDeprecatedFields(t *testing.T) {
	g := NewWithT(t)
	ws, err := BuildWorkspace(testStack(func(s *shared.StackSpec) {
		s.Backend = "file:///old"
		s.AccessTokenSecret = "old-token"
		s.EnvRefs = map[string]shared.ResourceRef{
			"PULUMI_BACKEND_URL":  shared.NewLiteralResourceRef("s3://new"),
			"PULUMI_ACCESS_TOKEN": shared.NewSecretResourceRef("new-token", "token"),
		}
	}), Source{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ws.Spec.Env).To(HaveLen(2))
	g.Expect(envByName(ws, "PULUMI_BACKEND_URL").Value).To(Equal("s3://new"))
	g.Expect(envByName(ws, "PULUMI_ACCESS_TOKEN").ValueFrom.SecretKeyRef.Name).To(Equal("new-token"))
}
