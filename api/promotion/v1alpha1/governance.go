package v1alpha1

// AuthorizedStageAnnotation, on a Stack, names the one Stage (in the
// Stack's namespace) that may deploy it: the Stack's consent, as Kargo's
// kargo.akuity.io/authorized-stage is an Argo CD Application's. A Stage
// deploys a Stack only when the Stage lists it in spec.stacks and the Stack
// names the Stage here. Setting, changing or removing the annotation needs
// the verb "govern" on each stage it names (config/policy), so one value
// means one owner: two stages can never both deploy a Stack. A Stack that
// names a stage must pin spec.commit of spec.projectRepo (no branch,
// Program or Flux source), so that only a promotion moves what it deploys.
const AuthorizedStageAnnotation = "promotion.stackyard.dev/authorized-stage"

// Verbs beyond Kubernetes' own that the admission policies in
// config/policy ask the API server's authorizer about. Grant them in a
// Role like any other verb.
const (
	// VerbGovern on stages is the power to decide what a stage deploys
	// and through which gates: creating or deleting a Stage, changing its
	// spec, and binding, unbinding or editing the Stacks it governs.
	VerbGovern = "govern"
	// VerbApprove on stages is the power to decide on a promotion into
	// the stage (an Approval).
	VerbApprove = "approve"
	// VerbAutoPromote on promotions lets a caller create promotions
	// requested by "stackyard:auto-promotion".
	VerbAutoPromote = "autopromote"
	// VerbRecord on releases, promotions, stages, approvals and stacks is
	// the power to write the records change management rests on: Releases,
	// Promotion, Stage and Stack status, and retention's deletions. Only
	// the operator's role holds it.
	VerbRecord = "record"
)
