package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"github.com/stackyard/stackyard/internal/redact"
)

// The resource attributes of the SubjectAccessReview: a caller may use a
// workspace's agent when it may "use" the "rpc" subresource of that
// Workspace object. They match the Pulumi Kubernetes Operator v2, so a Role
// such as
//
//	rules:
//	- apiGroups: ["auto.pulumi.com"]
//	  resources: ["workspaces/rpc"]
//	  resourceNames: ["my-workspace"]
//	  verbs: ["use"]
//
// grants it for either operator.
const (
	rpcGroup       = "auto.pulumi.com"
	rpcVersion     = "v1alpha1"
	rpcResource    = "workspaces"
	rpcSubresource = "rpc"
	rpcVerb        = "use"
)

// Defaults for KubernetesConfig.
const (
	// DefaultAllowTTL is how long an allowed token is cached: long enough to
	// spare the API server a review per RPC, short enough that revoking
	// access takes effect within half a minute.
	DefaultAllowTTL = 30 * time.Second
	// DefaultDenyTTL is how long a refused token is cached: enough to absorb
	// a burst of retries, short enough that a new RoleBinding is seen soon.
	DefaultDenyTTL = 5 * time.Second
	// DefaultCacheSize bounds the cached tokens; an agent normally sees one
	// or two callers, so this is only a ceiling against floods.
	DefaultCacheSize = 1024
	// DefaultReviewTimeout bounds one round of reviews so that a stuck API
	// server fails RPCs with Unavailable rather than hanging them.
	DefaultReviewTimeout = 10 * time.Second
)

// WorkspaceAudience returns the token audience that binds a service-account
// token to one workspace: "<name>.<namespace>". The operator requests tokens
// for this audience (TokenRequest), and the workspace's agent accepts only
// tokens issued for it, so a token stolen from one workspace opens no other
// and is not accepted by the API server itself. It is the audience the
// Pulumi Kubernetes Operator v2 uses; because a namespace never contains a
// dot, distinct workspaces always get distinct audiences.
func WorkspaceAudience(namespace, name string) string {
	return name + "." + namespace
}

// Reviewer asks the API server the two questions NewKubernetes delegates.
// It is an interface of its own, not a clientset, so that the agent's
// lean binary (cmd/stackyard-agent), which serves only static tokens,
// does not carry client-go's clientset: its package initialisation (every
// API group registered in a scheme) was about a tenth of that binary's
// start.
type Reviewer interface {
	// CreateTokenReview creates a TokenReview and returns it with its status.
	CreateTokenReview(ctx context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error)
	// CreateSubjectAccessReview creates a SubjectAccessReview and returns it
	// with its status.
	CreateSubjectAccessReview(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error)
}

// KubernetesConfig configures NewKubernetes.
type KubernetesConfig struct {
	// Client reaches the API server as the agent itself
	// (kubereviews.For adapts a clientset). That identity needs "create" on
	// tokenreviews.authentication.k8s.io and
	// subjectaccessreviews.authorization.k8s.io, which the built-in
	// ClusterRole system:auth-delegator grants.
	Client Reviewer

	// Namespace and Name identify the Workspace object the agent serves.
	// Both are required.
	Namespace string
	Name      string

	// Audiences are the token audiences accepted. Empty means
	// WorkspaceAudience(Namespace, Name), which is what callers should use.
	Audiences []string

	// AllowTTL is how long an allowed token is remembered without asking the
	// API server again. Zero means DefaultAllowTTL (30 s); negative disables
	// the positive cache. A revoked token or a removed RoleBinding takes up to
	// this long to take effect.
	AllowTTL time.Duration

	// DenyTTL is how long a refused token (Unauthenticated or
	// PermissionDenied) is remembered. Zero means DefaultDenyTTL (5 s);
	// negative disables the negative cache. It blunts floods of bad tokens
	// while letting a newly granted RoleBinding take effect quickly. Failures
	// to reach the API server are never cached.
	DenyTTL time.Duration

	// CacheSize bounds the number of remembered tokens; the least recently
	// used is evicted first. Zero means DefaultCacheSize (1024).
	CacheSize int

	// ReviewTimeout bounds one TokenReview plus SubjectAccessReview round.
	// Zero means DefaultReviewTimeout (10 s).
	ReviewTimeout time.Duration

	// Clock tells the cache the time; tests set a fake one. Nil means the
	// real clock.
	Clock clock.PassiveClock

	// Log receives one line per decision made by the API server (never for a
	// cache hit), with the user name but never the token. Denials and review
	// failures are logged at V(1), grants at V(2). The zero value discards.
	Log logr.Logger
}

// NewKubernetes returns an Authorizer that delegates both questions to the
// Kubernetes API server, for agents running in a cluster:
//
//  1. Authentication: a TokenReview (authentication.k8s.io/v1) of the bearer
//     token restricted to cfg.Audiences. A token the API server rejects, or
//     one that is valid but not issued for this workspace's audience, is
//     Unauthenticated.
//  2. Authorisation: a SubjectAccessReview (authorization.k8s.io/v1) for the
//     reviewed user, UID, groups and extra: may it "use" the "rpc"
//     subresource of the Workspace cfg.Namespace/cfg.Name in the
//     "auto.pulumi.com" group? If not, PermissionDenied.
//
// Decisions are cached by the SHA-256 digest of the token (see AllowTTL and
// DenyTTL), and concurrent calls with the same token share one review.
// When the API server cannot be asked, Authorize returns Unavailable (or
// Internal when the agent itself is not allowed to create reviews), and
// nothing is cached.
//
// NewKubernetes panics if cfg.Client, cfg.Namespace or cfg.Name is missing:
// that is a wiring mistake, and an agent that started without a usable
// policy must not serve.
func NewKubernetes(cfg KubernetesConfig) Authorizer {
	if cfg.Client == nil {
		panic("auth.NewKubernetes: KubernetesConfig.Client is required")
	}
	if cfg.Namespace == "" || cfg.Name == "" {
		panic("auth.NewKubernetes: KubernetesConfig.Namespace and Name are required")
	}
	k := &kubernetesAuthorizer{
		client:    cfg.Client,
		namespace: cfg.Namespace,
		name:      cfg.Name,
		audiences: slices.Clone(cfg.Audiences),
		allowTTL:  cmp.Or(cfg.AllowTTL, DefaultAllowTTL),
		denyTTL:   cmp.Or(cfg.DenyTTL, DefaultDenyTTL),
		timeout:   cmp.Or(cfg.ReviewTimeout, DefaultReviewTimeout),
		log:       cfg.Log,
	}
	if len(k.audiences) == 0 {
		k.audiences = []string{WorkspaceAudience(cfg.Namespace, cfg.Name)}
	}
	size := cfg.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	k.cache = cache.NewLRUExpireCacheWithClock(size, clk)
	return k
}

// kubernetesAuthorizer implements NewKubernetes.
type kubernetesAuthorizer struct {
	client    Reviewer
	namespace string
	name      string
	audiences []string
	allowTTL  time.Duration
	denyTTL   time.Duration
	timeout   time.Duration
	log       logr.Logger

	// cache maps tokenKey to decision.
	cache *cache.LRUExpireCache
	// inflight merges concurrent reviews of one token, keyed like cache.
	inflight singleflight.Group
}

// tokenKey is the cache key of a token: its SHA-256 digest, never the token.
type tokenKey [sha256.Size]byte

// decision is a cached outcome of a review: code OK for allowed, otherwise
// the status code and client-facing message.
type decision struct {
	code codes.Code
	msg  string
}

func (d decision) err() error {
	if d.code == codes.OK {
		return nil
	}
	return status.Error(d.code, d.msg)
}

// Authorize answers from the cache, or runs one review round and caches it.
func (k *kubernetesAuthorizer) Authorize(ctx context.Context, token string) error {
	if token == "" {
		return errUnauthenticated("missing bearer token")
	}
	key := tokenKey(sha256.Sum256([]byte(token)))
	if v, ok := k.cache.Get(key); ok {
		return v.(decision).err()
	}
	v, err, _ := k.inflight.Do(string(key[:]), func() (any, error) {
		// A review that finished between the lookup above and this call
		// has already cached its answer.
		if v, ok := k.cache.Get(key); ok {
			return v, nil
		}
		// The review outlives a caller that gives up, since other callers
		// may be waiting on the same result; ReviewTimeout bounds it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.timeout)
		defer cancel()
		d, err := k.review(rctx, token)
		if err != nil {
			return nil, err
		}
		ttl := k.denyTTL
		if d.code == codes.OK {
			ttl = k.allowTTL
		}
		if ttl > 0 {
			k.cache.Add(key, d, ttl)
		}
		return d, nil
	})
	if err != nil {
		return err
	}
	return v.(decision).err()
}

// review asks the API server about token: a TokenReview, then a
// SubjectAccessReview. A returned error means no decision was reached.
func (k *kubernetesAuthorizer) review(ctx context.Context, token string) (decision, error) {
	tr, err := k.client.CreateTokenReview(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: k.audiences},
	})
	if err != nil {
		return decision{}, k.reviewFailed("tokenreviews", err, token)
	}
	if !tr.Status.Authenticated {
		k.log.V(1).Info("Rejected an RPC token", "reason", redact.New(token).Redact(tr.Status.Error))
		return decision{codes.Unauthenticated, "invalid bearer token"}, nil
	}
	// An audience-aware API server echoes the audiences the token is valid
	// for; one that is not may accept a token meant for itself. Require the
	// echo so that only workspace-bound tokens pass.
	if !slices.ContainsFunc(tr.Status.Audiences, func(a string) bool { return slices.Contains(k.audiences, a) }) {
		k.log.V(1).Info("Rejected an RPC token not bound to this workspace",
			"user", tr.Status.User.Username, "audiences", tr.Status.Audiences)
		return decision{codes.Unauthenticated, "bearer token is not bound to this workspace"}, nil
	}

	user := tr.Status.User
	sar, err := k.client.CreateSubjectAccessReview(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user.Username,
			UID:    user.UID,
			Groups: user.Groups,
			Extra:  convertExtra(user.Extra),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace:   k.namespace,
				Name:        k.name,
				Verb:        rpcVerb,
				Group:       rpcGroup,
				Version:     rpcVersion,
				Resource:    rpcResource,
				Subresource: rpcSubresource,
			},
		},
	})
	if err != nil {
		return decision{}, k.reviewFailed("subjectaccessreviews", err, token)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		k.log.V(1).Info("Denied an RPC", "user", user.Username, "reason", sar.Status.Reason,
			"evaluationError", sar.Status.EvaluationError)
		msg := fmt.Sprintf("%q may not %s %s/%s of workspace %s/%s",
			user.Username, rpcVerb, rpcResource, rpcSubresource, k.namespace, k.name)
		if sar.Status.Reason != "" {
			msg += ": " + sar.Status.Reason
		}
		return decision{codes.PermissionDenied, msg}, nil
	}
	k.log.V(2).Info("Allowed an RPC", "user", user.Username)
	return decision{code: codes.OK}, nil
}

// reviewFailed turns a failed review request into the status error the
// caller sees. If the agent may not create reviews, no retry will help and
// the fix is on the agent's side, so that is Internal with a hint; anything
// else is Unavailable, which tells the client to retry.
func (k *kubernetesAuthorizer) reviewFailed(resource string, err error, token string) error {
	msg := redact.New(token).Redact(err.Error())
	k.log.V(1).Info("Could not review an RPC token", "resource", resource, "error", msg)
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return status.Errorf(codes.Internal,
			"the agent may not create %s; bind its service account to the ClusterRole system:auth-delegator", resource)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Errorf(codes.Unavailable, "%s: timed out", resource)
	}
	return status.Errorf(codes.Unavailable, "%s: %s", resource, msg)
}

// convertExtra copies a TokenReview's extra attributes into the
// SubjectAccessReview's type, so that authorisers that key on them (for
// example, on a service account token's pod binding) see them.
func convertExtra(in map[string]authenticationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authorizationv1.ExtraValue(slices.Clone(v))
	}
	return out
}
