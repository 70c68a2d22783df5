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

// PreviewStagesAnnotation, on a Stack that names a stage in
// AuthorizedStageAnnotation, lists (comma-separated) the other Stages that
// may preview it: run its program, with its credentials, at a commit of
// their choosing, without deploying it. A preview runs the program as an
// up does, so a governed Stack is previewed only by the stage that deploys
// it and by the stages named here, whether for a preview-only stage, a
// promotion or a pull request. Setting, changing or removing it needs the
// verb "govern" on the stage the Stack names (config/policy), the stage
// whose Stack's credentials are lent. A Stack that names no stage is not
// governed: whoever may edit it may run anything with its credentials
// already, and every stage may preview it, as upstream.
const PreviewStagesAnnotation = "promotion.stackyard.dev/preview-stages"

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

// EditedByAnnotation, on a governed Stack, names who last changed its
// spec apart from spec.commit, as the API server authenticated them (the
// request's username): the operator's admission webhook writes it, with
// EditedSpecAnnotation, on every write that changes a governed Stack's
// spec, over whatever the request said. config/policy refuses a write
// that sets either annotation to anyone but its own author, so the name
// here is always that of the user whose request wrote it. The operator
// believes it only for the spec whose digest EditedSpecAnnotation holds:
// a spec changed since (while no webhook ran) has no known editor.
const EditedByAnnotation = "promotion.stackyard.dev/edited-by"

// EditedSpecAnnotation is the digest of the spec, apart from
// spec.commit, that EditedByAnnotation's user wrote
// (change.SpecDigest).
const EditedSpecAnnotation = "promotion.stackyard.dev/edited-spec"
