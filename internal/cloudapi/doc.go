// Package cloudapi serves the two read-only Pulumi Cloud REST endpoints that
// Kargo AnalysisTemplates call to verify a stack, answered from the update
// history stackyard keeps in the cluster, so that a template written for
// Pulumi Cloud works against stackyard with only its base URL and token
// changed:
//
//	GET /api/stacks/{org}/{project}/{stack}/updates[?pageSize=N&page=P][&output-type=service]
//	GET /api/stacks/{org}/{project}/{stack}/updates/latest/previews[?pageSize=N&page=P]
//
// The first answers in Pulumi's CLI shape, newest first:
// {"updates":[{kind, startTime, message, environment, config, result,
// endTime, version, resourceChanges, resourceCount}]} (with
// output-type=service, the service shape below). It lists the operations
// that change a stack (kind update, refresh or destroy), never previews,
// as Pulumi Cloud's history does. The second answers in the service shape,
// oldest first: {"updates":[{info:{kind:"Pupdate", …}, updateID, version,
// latestVersion, requestedBy}], itemsPerPage, total}, listing the previews
// run since the stack's last non-preview operation, as Pulumi Cloud does.
//
// # Where the answers come from
//
// A Stack's status.history (its last pulumiv1.MaxHistory finished
// operations), its status.lastUpdate when that is not in the history, and
// the operation running now (status.currentUpdate, with its kind and start
// time from the Update object) as result "in-progress". environment holds
// "git.head", the commit the operation ran on (a Flux revision such as
// "main@sha1:<sha>" gives its SHA; a Program's revision gives none). config
// is always empty: configuration values are not served. version is the
// operation's start time in Unix seconds, raised where needed so that it
// strictly increases from one operation to the next; a preview's version is
// that of the operation before it, as Pulumi's stack version is.
//
// # Which Stacks answer
//
// {org}/{project}/{stack} names the Pulumi stack; a Stack deploys it when
// its spec.stack is "org/project/stack", or "org/stack" or "stack" and its
// status.projectInfo.name (the project of its last operation) is project.
// Every namespace is searched, or only the one given with ?namespace=NS.
// Several Stacks deploying the same Pulumi stack in one namespace (a Kargo
// setup often has one with spec.preview for the preview stage and one for
// the update stage) answer with their histories merged, as Pulumi Cloud
// keeps one history per stack. Stacks in more than one namespace that the
// caller may read are ambiguous: the answer is 409 until ?namespace= picks
// one.
//
// # Authentication and authorisation
//
// Every request carries "Authorization: Bearer <token>" or, as Pulumi Cloud
// expects, "Authorization: token <token>": a Kubernetes token (typically a
// ServiceAccount's) that the API server accepts, checked with a TokenReview
// (authentication.k8s.io/v1) with no audience of its own, then a
// SubjectAccessReview (authorization.k8s.io/v1) that the user may get the
// Stack (group pulumi.com, resource stacks, its namespace and name). A
// missing or rejected token is 401, a user who may get none of the matching
// Stacks is 403, and no matching Stack is 404, in Pulumi's error shape
// {"code": N, "message": "…"}. Tokens are never logged. A token's review
// and each access check are remembered for a few seconds
// (authn.CachedReviewer: an allowance for authn.DefaultCacheTTL, a refusal
// for a fifth of it), keyed by a digest of the token and by the whole user
// and attributes, so a revoked token or binding is honoured within that
// time; tokens not seen before are reviewed at a bounded rate per address.
package cloudapi
