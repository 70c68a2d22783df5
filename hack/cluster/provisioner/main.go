// Command provisioner is the test cluster's storage: the dynamic
// provisioner of its default StorageClass, so that PersistentVolumeClaims
// (the workspace cache's among them) bind as on any cluster with a default
// class. It is the single-node kind of provisioner that kind and k3s ship
// (local-path), reduced to what a test cluster needs: for each pending
// claim of -class it makes a directory under -root, writable by any user
// (workspace pods run as non-root users, and a hostPath volume gets no
// fsGroup), and a hostPath PersistentVolume bound to the claim; a
// PersistentVolume of its own that its claim released is deleted with its
// directory. hack/cluster/up.sh starts it and creates the class.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// provisionedBy is the annotation the PersistentVolume controller reads
// to leave the volumes of an external provisioner to it.
const provisionedBy = "pv.kubernetes.io/provisioned-by"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the cluster's kubeconfig")
	class := flag.String("class", "stackyard-test-local", "the StorageClass whose claims it provisions")
	name := flag.String("name", "stackyard.test/local", "the provisioner's name, the class's provisioner field")
	root := flag.String("root", "/tmp/stackyard-cluster/volumes", "the directory that holds the volumes")
	every := flag.Duration("every", time.Second, "how often it looks for claims and released volumes")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	p := &provisioner{cs: kubernetes.NewForConfigOrDie(cfg), class: *class, name: *name, root: *root}
	if err := os.MkdirAll(p.root, 0o755); err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Printf("provisioning claims of class %s under %s", p.class, p.root)
	for {
		if err := p.pass(ctx); err != nil && ctx.Err() == nil {
			log.Print(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(*every):
		}
	}
}

type provisioner struct {
	cs                kubernetes.Interface
	class, name, root string
}

// pass provisions every pending claim of the class and deletes every
// released volume of the provisioner.
func (p *provisioner) pass(ctx context.Context) error {
	claims, err := p.cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Status.Phase == corev1.ClaimPending && c.Spec.VolumeName == "" && c.DeletionTimestamp == nil &&
			c.Spec.StorageClassName != nil && *c.Spec.StorageClassName == p.class {
			errs = append(errs, p.provision(ctx, c))
		}
	}
	volumes, err := p.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for i := range volumes.Items {
		v := &volumes.Items[i]
		if v.Annotations[provisionedBy] == p.name && (v.Status.Phase == corev1.VolumeReleased || v.Status.Phase == corev1.VolumeFailed) {
			errs = append(errs, p.remove(ctx, v))
		}
	}
	return errors.Join(errs...)
}

// provision makes the claim's directory and its bound volume.
func (p *provisioner) provision(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	name := "pvc-" + string(c.UID)
	dir := filepath.Join(p.root, name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		return err
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{provisionedBy: p.name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   c.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              p.class,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: c.Namespace, Name: c.Name, UID: c.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr(corev1.HostPathDirectory)},
			},
		},
	}
	_, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	log.Printf("provisioned %s for claim %s/%s", name, c.Namespace, c.Name)
	return nil
}

// remove deletes a released volume and its directory.
func (p *provisioner) remove(ctx context.Context, v *corev1.PersistentVolume) error {
	if hp := v.Spec.HostPath; hp != nil && filepath.Dir(hp.Path) == p.root {
		if err := os.RemoveAll(hp.Path); err != nil {
			return err
		}
	}
	err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, v.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	log.Printf("deleted %s, released by its claim", v.Name)
	return nil
}

func ptr[T any](v T) *T { return &v }
