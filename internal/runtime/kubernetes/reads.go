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
		reads := readset.Set{}
		for _, e := range c.Env {
			switch from := e.ValueFrom; {
			case from == nil:
			case from.SecretKeyRef != nil:
				if err := r.readVersion(ctx, ws.Namespace, from.SecretKeyRef.Name, &corev1.Secret{}, reads); err != nil {
					return err
				}
			case from.ConfigMapKeyRef != nil:
				if err := r.readVersion(ctx, ws.Namespace, from.ConfigMapKeyRef.Name, &corev1.ConfigMap{}, reads); err != nil {
					return err
				}
			}
		}
		for _, from := range c.EnvFrom {
			switch {
			case from.SecretRef != nil:
				if err := r.readVersion(ctx, ws.Namespace, from.SecretRef.Name, &corev1.Secret{}, reads); err != nil {
					return err
				}
			case from.ConfigMapRef != nil:
				if err := r.readVersion(ctx, ws.Namespace, from.ConfigMapRef.Name, &corev1.ConfigMap{}, reads); err != nil {
					return err
				}
			}
		}
		env := corev1.EnvVar{Name: readset.EnvVar, Value: reads.Encode()}
		c.Env = append([]corev1.EnvVar{env}, slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == readset.EnvVar })...)
		return nil
	}
	return nil
}

// readVersion records in reads the resourceVersion of the object of the
// namespace named name ("" when it does not exist), read into obj.
func (r *Runtime) readVersion(ctx context.Context, namespace, name string, obj client.Object, reads readset.Set) error {
	kind := "Secret"
	if _, ok := obj.(*corev1.ConfigMap); ok {
		kind = "ConfigMap"
	}
	switch err := r.opts.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); {
	case apierrors.IsNotFound(err):
		reads.Add(kind, name, "")
	case err != nil:
		return reconcile.NewGeneric("", fmt.Errorf("reading %s %s, which the agent's environment names: %w", kind, name, err))
	default:
		reads.Add(kind, name, obj.GetResourceVersion())
	}
	return nil
}
