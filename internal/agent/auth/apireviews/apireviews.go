// Package apireviews asks the Kubernetes API server the agent's two
// questions (a TokenReview, then a SubjectAccessReview) over its REST API
// with net/http and the pod's service account files, without client-go.
// It is the auth.Reviewer of the lean agent binary (cmd/stackyard-agent),
// whose start the package initialisation of client-go's clientset would
// double; `stackyard agent serve` adapts a clientset instead
// (internal/agent/auth/kubereviews).
package apireviews

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ServiceAccountDir is where Kubernetes mounts a pod's service account
// token and the cluster's CA bundle.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// maxResponse bounds a review response read into memory: a review is a
// few hundred bytes, so anything near this is not one.
const maxResponse = 1 << 20

// Config says where the API server is and how the agent proves who it is.
type Config struct {
	// Server is the API server's base URL, https://host:port.
	Server string
	// TokenFile holds the agent's bearer token. It is read at every
	// request, so a projected token that the kubelet rotates is always the
	// current one.
	TokenFile string
	// CAFile holds the PEM bundle that the API server's certificate must
	// chain to.
	CAFile string
	// Timeout bounds one request when its context has no deadline. Zero
	// means 10 s.
	Timeout time.Duration
}

// InCluster returns the Config of a pod: the API server from
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, as every in-cluster
// client finds it, and the token and CA from dir (ServiceAccountDir when
// empty).
func InCluster(dir string) (Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, errors.New("not in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
	}
	if dir == "" {
		dir = ServiceAccountDir
	}
	return Config{
		Server:    "https://" + net.JoinHostPort(host, port),
		TokenFile: filepath.Join(dir, "token"),
		CAFile:    filepath.Join(dir, "ca.crt"),
	}, nil
}

// Reviews implements auth.Reviewer over HTTPS.
type Reviews struct {
	base      *url.URL
	tokenFile string
	client    *http.Client
	timeout   time.Duration
}

// New checks cfg, reads its CA bundle and its token once (so that a pod
// without them fails at start, naming the file), and returns the Reviews.
func New(cfg Config) (*Reviews, error) {
	base, err := url.Parse(cfg.Server)
	if err != nil || base.Scheme != "https" || base.Host == "" {
		return nil, fmt.Errorf("API server %q: want an https://host:port URL", cfg.Server)
	}
	pem, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("the API server's CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the API server's CA bundle %s holds no PEM certificate", cfg.CAFile)
	}
	if _, err := readToken(cfg.TokenFile); err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	transport := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: timeout,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	// A redirect would carry the reviewed token, in the body, elsewhere:
	// the API server's answer is taken as it is.
	client := &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Reviews{base: base, tokenFile: cfg.TokenFile, client: client, timeout: timeout}, nil
}

// readToken reads the bearer token in file.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("the agent's service account token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("the agent's service account token %s is empty", file)
	}
	return token, nil
}

// CreateTokenReview creates tr and returns it with its status.
func (r *Reviews) CreateTokenReview(ctx context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	in := *tr
	in.TypeMeta = metav1.TypeMeta{APIVersion: authenticationv1.SchemeGroupVersion.String(), Kind: "TokenReview"}
	out := &authenticationv1.TokenReview{}
	err := r.create(ctx, authenticationv1.SchemeGroupVersion.WithResource("tokenreviews"), &in, out)
	return out, err
}

// CreateSubjectAccessReview creates sar and returns it with its status.
func (r *Reviews) CreateSubjectAccessReview(ctx context.Context, sar *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	in := *sar
	in.TypeMeta = metav1.TypeMeta{APIVersion: authorizationv1.SchemeGroupVersion.String(), Kind: "SubjectAccessReview"}
	out := &authorizationv1.SubjectAccessReview{}
	err := r.create(ctx, authorizationv1.SchemeGroupVersion.WithResource("subjectaccessreviews"), &in, out)
	return out, err
}

// create POSTs in to the cluster-scoped resource gvr and decodes the answer
// into out. A refusal is an *apierrors.StatusError, as client-go returns
// it, so apierrors.IsForbidden and the like work on it. Neither the
// request nor the response body (both hold the reviewed token) is ever
// part of an error.
func (r *Reviews) create(ctx context.Context, gvr schema.GroupVersionResource, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	token, err := readToken(r.tokenFile)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	u := r.base.JoinPath("apis", gvr.Group, gvr.Version, gvr.Resource)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "stackyard-agent")
	resp, err := r.client.Do(req)
	if err != nil {
		// url.Error names the URL, never a header or the body.
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("reading the %s response: %w", gvr.Resource, err)
	}
	if resp.StatusCode/100 != 2 {
		return statusError(resp.StatusCode, gvr.GroupResource(), data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding the %s response: %w", gvr.Resource, err)
	}
	return nil
}

// statusError is the error of a refused request: the API server's own
// Status when the body is one, otherwise one made from the HTTP code
// alone.
func statusError(code int, gr schema.GroupResource, body []byte) error {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Code == int32(code) { //nolint:gosec // HTTP codes fit
		return &apierrors.StatusError{ErrStatus: st}
	}
	return apierrors.NewGenericServerResponse(code, http.MethodPost, gr, "", "", 0, true)
}
