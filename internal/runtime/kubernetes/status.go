package kubernetes

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/internal/runtime"
	"github.com/stackyard/stackyard/internal/source"
)

// rolledOut reports whether the StatefulSet controller has acted on the
// current spec and its one replica runs that spec and is ready.
func rolledOut(sts *appsv1.StatefulSet) bool {
	s := sts.Status
	return s.ObservedGeneration >= sts.Generation &&
		s.ReadyReplicas >= 1 && s.UpdatedReplicas >= 1 &&
		(s.UpdateRevision == "" || s.CurrentRevision == s.UpdateRevision)
}

// stale reports whether pod runs a revision other than the StatefulSet's
// update revision.
func stale(sts *appsv1.StatefulSet, pod *corev1.Pod) bool {
	return pod != nil && sts.Status.UpdateRevision != "" &&
		pod.Labels[appsv1.ControllerRevisionHashLabelKey] != sts.Status.UpdateRevision
}

// podReady reports whether the pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// initStatus returns the init container's status in pod, or nil.
func initStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	if pod == nil {
		return nil
	}
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == InitContainerName {
			return &pod.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// initReport reads the report `agent init` left as the init container's
// termination message; the zero Report when there is none.
func initReport(pod *corev1.Pod) source.Report {
	st := initStatus(pod)
	if st == nil {
		return source.Report{}
	}
	for _, term := range []*corev1.ContainerStateTerminated{st.State.Terminated, st.LastTerminationState.Terminated} {
		if term == nil || term.Message == "" {
			continue
		}
		if r, err := source.ParseReport(term.Message); err == nil {
			return r
		}
	}
	return source.Report{}
}

// fetchFailure returns the Stalling error of a permanent fetch failure
// reported by the pod's init container; transient failures are left to
// the kubelet's restarts (and show in waitingMessage).
func fetchFailure(ws *autov1alpha1.Workspace, pod *corev1.Pod) error {
	r := initReport(pod)
	if !r.Failed() || !r.Permanent {
		return nil
	}
	src, err := runtime.SourceOf(ws)
	if err != nil {
		return err
	}
	return src.FetchError(r.Err())
}

// waitingMessage says, for a person, what the workspace waits for.
func waitingMessage(sts *appsv1.StatefulSet, pod *corev1.Pod) string {
	if pod == nil {
		return fmt.Sprintf("waiting for StatefulSet %s to create its pod", sts.Name)
	}
	var why []string
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			// An unbound cache claim (no default StorageClass, or one
			// that cannot provision) shows here, as the scheduler says.
			why = append(why, "not scheduled: "+c.Message)
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, st := range statuses {
		switch {
		case st.State.Waiting != nil && st.State.Waiting.Reason != "" && st.State.Waiting.Reason != "PodInitializing":
			why = append(why, fmt.Sprintf("container %s: %s %s", st.Name, st.State.Waiting.Reason, st.State.Waiting.Message))
		case st.State.Terminated != nil && st.State.Terminated.ExitCode != 0:
			why = append(why, fmt.Sprintf("container %s: exited %d", st.Name, st.State.Terminated.ExitCode))
		}
	}
	if r := initReport(pod); r.Failed() {
		why = append(why, "fetching the source: "+string(r.Reason)+": "+r.Message)
	}
	if len(why) == 0 {
		return fmt.Sprintf("waiting for pod %s to be ready", pod.Name)
	}
	return fmt.Sprintf("waiting for pod %s: %s", pod.Name, strings.TrimSpace(strings.Join(why, "; ")))
}
