package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/readset"
	"github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/redact"
)

// DefaultInheritEnv are the operator's environment variables an agent
// inherits when Options.InheritEnv is nil: what a process needs to find its
// home, its locale and the network, and nothing that could carry the
// operator's own credentials.
var DefaultInheritEnv = []string{
	"HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
}

// Reasons of the errors environment resolution returns.
const (
	// ReasonEnvSourceMissing: a Secret, ConfigMap or key that env or
	// envFrom refers to does not exist (yet); like a kubelet, the runtime
	// waits for it.
	ReasonEnvSourceMissing = "EnvSourceMissing"
	// ReasonEnvUnsupported: an env entry uses a source only a pod has
	// (fieldRef, resourceFieldRef, fileKeyRef).
	ReasonEnvUnsupported = "EnvUnsupported"
)

// environment builds the agent's environment, sorted, as KEY=VALUE. Later
// layers win: inherited variables, the runtime's, Options.Env, envFrom in
// order, env in order.
func (r *Runtime) environment(ctx context.Context, ws *autov1alpha1.Workspace, dir string) ([]string, error) {
	vars := map[string]string{}
	for _, name := range r.opts.InheritEnv {
		if v, ok := os.LookupEnv(name); ok {
			vars[name] = v
		}
	}
	path := slices.Clone(r.opts.PathDirs)
	if p := os.Getenv("PATH"); p != "" {
		path = append(path, p)
	}
	vars["PATH"] = strings.Join(path, string(os.PathListSeparator))
	vars["PULUMI_HOME"] = filepath.Join(dir, homeDir)
	vars["PULUMI_SKIP_UPDATE_CHECK"] = "true"
	for k, v := range r.opts.Env {
		vars[k] = v
	}
	secret := map[string]bool{}
	e := &envReads{r: r, reads: readset.Set{}}
	if err := e.addEnvFrom(ctx, ws, vars, secret); err != nil {
		return nil, err
	}
	if err := e.addEnv(ctx, ws, vars, secret); err != nil {
		return nil, err
	}
	// The agent learns which versions its environment holds, to refuse
	// an operation the operator checked other versions for; a new version
	// changes the environment, which restarts the agent.
	vars[readset.EnvVar] = e.reads.Encode()
	var names []string
	for name, isSecret := range secret {
		if isSecret {
			names = append(names, name)
		}
	}
	if len(names) > 0 {
		vars[redact.SecretEnvVar] = redact.EncodeSecretEnv(names)
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}

// envReads reads the Secrets and ConfigMaps an environment is built from,
// and records the version of each (reads).
type envReads struct {
	r     *Runtime
	reads readset.Set
}

// addEnvFrom adds every key of the Secrets and ConfigMaps of spec.envFrom.
// Names read from Secrets are recorded in secret.
func (r *envReads) addEnvFrom(ctx context.Context, ws *autov1alpha1.Workspace, vars map[string]string, secret map[string]bool) error {
	for i, from := range ws.Spec.EnvFrom {
		field := fmt.Sprintf("spec.envFrom[%d]", i)
		var data map[string]string
		var err error
		switch {
		case from.SecretRef != nil:
			data, err = r.secretData(ctx, ws.Namespace, from.SecretRef.Name)
			err = missing(err, field, "secret", from.SecretRef.Name, from.SecretRef.Optional)
		case from.ConfigMapRef != nil:
			data, err = r.configMapData(ctx, ws.Namespace, from.ConfigMapRef.Name)
			err = missing(err, field, "configmap", from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
		default:
			continue
		}
		if err != nil {
			return err
		}
		for k, v := range data {
			vars[from.Prefix+k] = v
			secret[from.Prefix+k] = from.SecretRef != nil
		}
	}
	return nil
}

// addEnv adds spec.env, reading valueFrom Secret and ConfigMap keys.
// Names read from Secrets are recorded in secret.
func (r *envReads) addEnv(ctx context.Context, ws *autov1alpha1.Workspace, vars map[string]string, secret map[string]bool) error {
	for i, e := range ws.Spec.Env {
		field := fmt.Sprintf("spec.env[%d] (%s)", i, e.Name)
		if e.ValueFrom == nil {
			vars[e.Name] = e.Value
			secret[e.Name] = false
			continue
		}
		var name, key string
		var optional *bool
		var data map[string]string
		var err error
		switch from := e.ValueFrom; {
		case from.SecretKeyRef != nil:
			name, key, optional = from.SecretKeyRef.Name, from.SecretKeyRef.Key, from.SecretKeyRef.Optional
			data, err = r.secretData(ctx, ws.Namespace, name)
			err = missing(err, field, "secret", name, optional)
		case from.ConfigMapKeyRef != nil:
			name, key, optional = from.ConfigMapKeyRef.Name, from.ConfigMapKeyRef.Key, from.ConfigMapKeyRef.Optional
			data, err = r.configMapData(ctx, ws.Namespace, name)
			err = missing(err, field, "configmap", name, optional)
		default:
			return reconcile.NewStalling(ReasonEnvUnsupported,
				fmt.Errorf("%s: the local runtime reads only secretKeyRef and configMapKeyRef", field))
		}
		if err != nil {
			return err
		}
		v, ok := data[key]
		switch {
		case ok:
			vars[e.Name] = v
			secret[e.Name] = e.ValueFrom.SecretKeyRef != nil
		case data == nil || (optional != nil && *optional):
			// An optional source or key that is absent sets nothing.
		default:
			return reconcile.NewWaiting(ReasonEnvSourceMissing, fmt.Errorf("%s: key %q not found in %q", field, key, name), 0)
		}
	}
	return nil
}

// missing maps the error of reading an env source: an absent optional one
// is no error (its data stays nil), an absent required one is waited for.
func missing(err error, field, kind, name string, optional *bool) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err) && optional != nil && *optional:
		return nil
	case apierrors.IsNotFound(err):
		return reconcile.NewWaiting(ReasonEnvSourceMissing, fmt.Errorf("%s: %s %q not found", field, kind, name), 0)
	default:
		return reconcile.NewGeneric("", fmt.Errorf("%s: reading %s %q: %w", field, kind, name, err))
	}
}

// secretData returns a Secret's data as strings, and records its version
// ("" when it does not exist).
func (r *envReads) secretData(ctx context.Context, namespace, name string) (map[string]string, error) {
	var s corev1.Secret
	if err := r.read(ctx, namespace, name, &s); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(s.Data)+len(s.StringData))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// configMapData returns a ConfigMap's data, binary data included, and
// records its version ("" when it does not exist).
func (r *envReads) configMapData(ctx context.Context, namespace, name string) (map[string]string, error) {
	var cm corev1.ConfigMap
	if err := r.read(ctx, namespace, name, &cm); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.BinaryData {
		out[k] = string(v)
	}
	for k, v := range cm.Data {
		out[k] = v
	}
	return out, nil
}

// read gets the object of the Workspace's namespace and records the
// version it read: a missing one as "", which is what the operator's check
// records for it too.
func (r *envReads) read(ctx context.Context, namespace, name string, obj client.Object) error {
	kind := "Secret"
	if _, ok := obj.(*corev1.ConfigMap); ok {
		kind = "ConfigMap"
	}
	err := r.r.opts.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	switch {
	case err == nil:
		r.reads.Add(kind, name, obj.GetResourceVersion())
	case apierrors.IsNotFound(err):
		r.reads.Add(kind, name, "")
	}
	return err
}
