package pipelinectl

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	promotionv1alpha1 "github.com/stackyard/stackyard/api/promotion/v1alpha1"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
)

// Client reads and writes change-management objects in one namespace.
type Client struct {
	// Client is the API client.
	Client client.Client
	// Namespace is where the pipeline's objects are.
	Namespace string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// New returns a Client for cfg, in namespace.
func New(cfg *rest.Config, namespace string) (*Client, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, pulumiv1.AddToScheme, promotionv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &Client{Client: c, Namespace: namespace}, nil
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// WhoAmI returns the user name the API server authenticates the client
// as, which a Promotion's spec.requestedBy must carry.
func (c *Client) WhoAmI(ctx context.Context) (string, error) {
	who, err := c.Identity(ctx)
	return who.User, err
}

// Identity is who the API server authenticates a client as.
type Identity struct {
	// User is the user name.
	User string
	// Groups are the user's groups, as the API server sees them (with
	// system:authenticated).
	Groups []string
}

// Identity asks the API server who the client is (a SelfSubjectReview):
// the user name and groups an Approval's spec.user and spec.groups must
// carry.
func (c *Client) Identity(ctx context.Context) (Identity, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Client.Create(ctx, review); err != nil {
		return Identity{}, fmt.Errorf("asking the API server who you are: %w", err)
	}
	return Identity{User: review.Status.UserInfo.Username, Groups: review.Status.UserInfo.Groups}, nil
}

// stages lists the Stages of pipeline ("" for every pipeline), by name.
func (c *Client) stages(ctx context.Context, pipeline string) ([]promotionv1alpha1.Stage, error) {
	var list promotionv1alpha1.StageList
	if err := c.Client.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, fmt.Errorf("listing stages: %w", err)
	}
	var out []promotionv1alpha1.Stage
	for _, s := range list.Items {
		if pipeline == "" || s.Spec.Pipeline == pipeline {
			out = append(out, s)
		}
	}
	return out, nil
}

// stage reads one Stage.
func (c *Client) stage(ctx context.Context, name string) (*promotionv1alpha1.Stage, error) {
	var s promotionv1alpha1.Stage
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("stage %q: %w", name, err)
	}
	return &s, nil
}

// releases lists the Releases of pipeline.
func (c *Client) releases(ctx context.Context, pipeline string) ([]promotionv1alpha1.Release, error) {
	var list promotionv1alpha1.ReleaseList
	if err := c.Client.List(ctx, &list, client.InNamespace(c.Namespace), client.MatchingLabels{promotionv1alpha1.PipelineLabel: pipeline}); err != nil {
		return nil, fmt.Errorf("listing releases of pipeline %q: %w", pipeline, err)
	}
	return list.Items, nil
}

// promotions lists the Promotions of stage ("" for every stage).
func (c *Client) promotions(ctx context.Context, stage string) ([]promotionv1alpha1.Promotion, error) {
	var list promotionv1alpha1.PromotionList
	if err := c.Client.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, fmt.Errorf("listing promotions: %w", err)
	}
	var out []promotionv1alpha1.Promotion
	for _, p := range list.Items {
		if stage == "" || p.Spec.Stage == stage {
			out = append(out, p)
		}
	}
	return out, nil
}
