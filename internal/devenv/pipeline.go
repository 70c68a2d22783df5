package devenv

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// The sample pipeline's names, in namespace default: Pipeline
// SamplePipeline follows the sample repository's main branch; Stage
// SampleDev (fed by it, promoted automatically) deploys Stack SampleDev, and
// Stage SampleProd (fed by SampleDev, promoted automatically once a person
// approves) deploys Stack SampleProd.
const (
	SamplePipeline = "sample"
	SampleDev      = "sample-dev"
	SampleProd     = "sample-prod"
)

// samplePipelineInterval is how often the sample pipeline looks for new
// commits; the dashboard's "Check now" asks at once.
const samplePipelineInterval = 30 * time.Second

// EnsurePipeline creates the sample pipeline unless it exists, following
// repoURL, with its two Stacks pinned to the repository's current commit
// until a promotion moves them. Each Stack writes its own file beside the
// sample Stack's.
func (s *Sample) EnsurePipeline(ctx context.Context, c client.Client, repoURL string) error {
	head, err := git(s.RepoDir, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	ns := corev1.NamespaceDefault
	objs := []client.Object{
		s.pipelineStack(ns, SampleDev, repoURL, head),
		s.pipelineStack(ns, SampleProd, repoURL, head),
		&promotionv1alpha1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SamplePipeline},
			Spec: promotionv1alpha1.PipelineSpec{
				Git:      promotionv1alpha1.GitSubscription{RepoURL: repoURL, Branch: "main"},
				Interval: &metav1.Duration{Duration: samplePipelineInterval},
			},
		},
		&promotionv1alpha1.Stage{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SampleDev},
			Spec: promotionv1alpha1.StageSpec{
				Pipeline: SamplePipeline, Stacks: []promotionv1alpha1.StackBinding{{Name: SampleDev}},
				Sources:              promotionv1alpha1.ReleaseSources{Direct: true},
				AutoPromotionOptions: &promotionv1alpha1.AutoPromotionOptions{Enabled: true},
			},
		},
		&promotionv1alpha1.Stage{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SampleProd},
			Spec: promotionv1alpha1.StageSpec{
				Pipeline: SamplePipeline, Stacks: []promotionv1alpha1.StackBinding{{Name: SampleProd}},
				Sources:              promotionv1alpha1.ReleaseSources{Stages: []string{SampleDev}},
				AutoPromotionOptions: &promotionv1alpha1.AutoPromotionOptions{Enabled: true},
				Approval:             &promotionv1alpha1.ApprovalPolicy{Required: 1},
			},
		},
	}
	objs = append(objs, reviewerRole(ns)...)
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", kindOf(obj), obj.GetName(), err)
		}
	}
	return followRepo(ctx, c, ns, repoURL)
}

// pipelineStack is a Stack of the sample pipeline: the sample program at
// commit, writing <name>.txt.
func (s *Sample) pipelineStack(ns, name, repoURL, commit string) *pulumiv1.Stack {
	path := filepath.Join(filepath.Dir(s.OutputFile), name+".txt")
	return &pulumiv1.Stack{
		// Each Stack of the sample pipeline consents to the stage of its name.
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
			promotionv1alpha1.AuthorizedStageAnnotation: name,
		}},
		Spec: shared.StackSpec{
			Stack:     name,
			Backend:   "file://" + s.BackendDir,
			GitSource: &shared.GitSource{ProjectRepo: repoURL, Commit: commit},
			Config: map[string]apiextensionsv1.JSON{
				SampleName + ":message": {Raw: []byte(fmt.Sprintf("%q", "hello from "+name))},
				SampleName + ":path":    {Raw: []byte(fmt.Sprintf("%q", path))},
			},
			DestroyOnFinalize: true,
		},
	}
}

// followRepo points the sample pipeline and its Stacks at repoURL when the
// git server moved to another port since they were made, and makes each
// Stack consent to its stage if an older stackyard made it without.
func followRepo(ctx context.Context, c client.Client, ns, repoURL string) error {
	var p promotionv1alpha1.Pipeline
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: SamplePipeline}, &p); err != nil {
		return err
	}
	if p.Spec.Git.RepoURL != repoURL {
		p.Spec.Git.RepoURL = repoURL
		if err := c.Update(ctx, &p); err != nil {
			return err
		}
	}
	for _, name := range []string{SampleDev, SampleProd} {
		var st pulumiv1.Stack
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &st); err != nil {
			return err
		}
		moved := st.Spec.GitSource != nil && st.Spec.ProjectRepo != repoURL
		// A .stackyard/ from before stages needed the Stack's consent.
		unauthorized := st.Annotations[promotionv1alpha1.AuthorizedStageAnnotation] == ""
		if moved || unauthorized {
			if moved {
				st.Spec.ProjectRepo = repoURL
			}
			metav1.SetMetaDataAnnotation(&st.ObjectMeta, promotionv1alpha1.AuthorizedStageAnnotation, name)
			if err := c.Update(ctx, &st); err != nil {
				return err
			}
		}
	}
	return nil
}

func kindOf(obj client.Object) string {
	return fmt.Sprintf("%T", obj)[1:]
}

// SampleReviewer is a user of the sample namespace who may review and
// approve promotions, and nothing more: the walkthrough approves, as them
// (`stackyard approve --as reviewer`), a held change its reader made, whose
// author's own approval does not count.
const SampleReviewer = "reviewer"

// reviewerRole is SampleReviewer's Role and RoleBinding in ns.
func reviewerRole(ns string) []client.Object {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stackyard-sample-reviewer"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{promotionv1alpha1.GroupVersion.Group}, Resources: []string{"stages"}, Verbs: []string{"get", "list", "watch", "approve"}},
			{APIGroups: []string{promotionv1alpha1.GroupVersion.Group}, Resources: []string{"promotions", "pipelines", "releases"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{promotionv1alpha1.GroupVersion.Group}, Resources: []string{"approvals"}, Verbs: []string{"get", "list", "create"}},
			{APIGroups: []string{pulumiv1.GroupVersion.Group}, Resources: []string{"stacks"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: SampleReviewer}},
	}
	return []client.Object{role, binding}
}
