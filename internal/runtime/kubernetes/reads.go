package kubernetes

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/agent/readset"
	"github.com/stackyard/stackyard/internal/reconcile"
)

// stampReads tells the agent container of sts which versions of the
// Secrets and ConfigMaps its environment names it is built from
// (readset.EnvVar), read live now. A new version changes the pod
// template, which replaces the pod.
//
// The kubelet reads those objects itself when the container starts, after
// this read. An object written in between gives the agent newer values
// than it is told; the operator's check then finds the newer version,
// which is not the one the agent names, and the agent refuses: the
// mismatch is on the safe side. Files mounted from Secrets are not
// environment: the kubelet refreshes them in place, and they are not
// covered (docs/security.md).
func (r *Runtime) stampReads(ctx context.Context, ws *autov1alpha1.Workspace, sts *appsv1.StatefulSet) error {
	containers := sts.Spec.Template.Spec.Containers
	for i := range containers {
		if containers[i].Name != ContainerName {
			continue
		}
		c := &containers[i]
		// The objects the environment names, each read once however many
		// variables it fills.
		var refs []objectRef
		name := func(kind, n string) {
			if !slices.Contains(refs, objectRef{kind, n}) {
				refs = append(refs, objectRef{kind, n})
			}
		}
		for _, e := range c.Env {
			switch from := e.ValueFrom; {
			case from == nil:
			case from.SecretKeyRef != nil:
				name("Secret", from.SecretKeyRef.Name)
			case from.ConfigMapKeyRef != nil:
				name("ConfigMap", from.ConfigMapKeyRef.Name)
			}
		}
		for _, from := range c.EnvFrom {
			switch {
			case from.SecretRef != nil:
				name("Secret", from.SecretRef.Name)
			case from.ConfigMapRef != nil:
				name("ConfigMap", from.ConfigMapRef.Name)
			}
		}
		reads := readset.Set{}
		for _, ref := range refs {
			if err := r.readVersion(ctx, ws.Namespace, ref, reads); err != nil {
				return err
			}
		}
		env := corev1.EnvVar{Name: readset.EnvVar, Value: reads.Encode()}
		c.Env = append([]corev1.EnvVar{env}, slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == readset.EnvVar })...)
		return nil
	}
	return nil
}

// objectRef names a Secret or ConfigMap of the Workspace's namespace.
type objectRef struct{ kind, name string }

// readVersion records in reads the resourceVersion of the object ref
// names ("" when it does not exist).
func (r *Runtime) readVersion(ctx context.Context, namespace string, ref objectRef, reads readset.Set) error {
	var obj client.Object = &corev1.ConfigMap{}
	if ref.kind == "Secret" {
		obj = &corev1.Secret{}
	}
	switch err := r.opts.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.name}, obj); {
	case apierrors.IsNotFound(err):
		reads.Add(ref.kind, ref.name, "")
	case err != nil:
		return reconcile.NewGeneric("", fmt.Errorf("reading %s %s, which the agent's environment names: %w", ref.kind, ref.name, err))
	default:
		reads.Add(ref.kind, ref.name, obj.GetResourceVersion())
	}
	return nil
}
