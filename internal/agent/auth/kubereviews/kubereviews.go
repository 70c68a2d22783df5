// Package kubereviews adapts a client-go clientset to auth.Reviewer, the
// two reviews the agent's Kubernetes authorizer asks the API server for.
// It is a package of its own so that what imports auth (the agent's lean
// binary among them) does not import the clientset.
package kubereviews

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// For returns the reviews of cs, an auth.Reviewer. It panics on a nil cs,
// as auth.NewKubernetes does on a nil Reviewer: an agent wired without a
// client must not start serving.
func For(cs kubernetes.Interface) Reviews {
	if cs == nil {
		panic("kubereviews.For: nil clientset")
	}
	return Reviews{cs: cs}
}

// Reviews creates TokenReviews and SubjectAccessReviews through a
// clientset.
type Reviews struct{ cs kubernetes.Interface }

// CreateTokenReview creates tr.
func (r Reviews) CreateTokenReview(ctx context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	return r.cs.AuthenticationV1().TokenReviews().Create(ctx, tr, metav1.CreateOptions{})
}

// CreateSubjectAccessReview creates sar.
func (r Reviews) CreateSubjectAccessReview(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	return r.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
}
