// Package kubernetes runs each Workspace's agent in a pod: a StatefulSet of
// one replica behind a headless Service, both named <workspace>-workspace
// and owned by the Workspace, so the garbage collector removes them with it.
//
// Unlike the Pulumi Kubernetes Operator, which keeps one pod per stack up
// forever, the StatefulSet is scaled to zero by Idle, and back to one by
// Ensure: no pod stays up for a stack nobody is operating on.
//
// # The pod
//
//   - a shared emptyDir volume at /share;
//   - an init container "init", running the operator's own image, that
//     copies the lean agent to /share/stackyard-agent (`--copy-agent`)
//     and runs `stackyard agent init` into /share/source with the Workspace's source flags
//     (runtime.Source.InitArgs, encoded by internal/source so that init
//     decodes exactly what was meant); git credentials are the Secret keys of
//     spec.git.auth mounted as files under /etc/stackyard/git. The outcome
//     (revision, or failure reason) is the init container's termination
//     message, which Ensure reads back: a permanent fetch failure stalls
//     the Workspace;
//   - the container "pulumi", running spec.image (by default a pinned
//     pulumi/pulumi image, the -nonroot variant for the restricted profile),
//     which runs `/share/stackyard-agent serve` (the lean agent the init
//     container copied; its stackyard where the init image has none) on port 50051 with
//     Kubernetes authentication: callers present a service account token
//     bound to the Workspace's audience, checked by TokenReview and
//     SubjectAccessReview. A TCP readiness probe says when it serves;
//   - spec.env, envFrom, resources and serviceAccountName, the security
//     context of spec.securityProfile, and finally spec.podTemplate merged
//     over the whole pod spec as a strategic merge patch.
//
// The objects are written with server-side apply, so fields other
// controllers or people add are left alone. Ensure reports Ready when the
// StatefulSet has rolled out and its pod is ready; the Address is
// <name>-workspace.<namespace>:50051 and the Instance is the pod's UID (a
// new pod has a fresh emptyDir). Dial mints a token for the operator's own
// service account with the TokenRequest API for the Workspace's audience,
// cached until near its expiry.
package kubernetes
