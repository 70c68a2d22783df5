// Package workspace holds the Workspace reconciler: it keeps each
// Workspace's agent running through a runtime.Runtime while the Workspace
// is in use, sets its stacks up (select or create, configuration, ESC
// environments, `pulumi install` once per source revision), and idles the
// agent when nobody needs it.
//
// The package is split by concern: workspace_controller.go holds the
// Reconciler, its options, Reconcile and the deferred status write;
// activity.go decides whether the agent should run; agentsetup.go starts the
// agent and sets the stacks up in it; config.go maps the API's configuration
// to the agent's; status.go writes the conditions; setup.go the watches.
//
// # Conditions: Ready, Active, Stalled, Reconciling
//
// Ready keeps the meaning the Pulumi Kubernetes Operator v2 gives it, "the
// workspace can serve Updates": True (reason Succeeded) once the source was
// fetched and every stack of spec.stacks was selected and configured for the
// current generation. It stays True while the agent is idle, because the
// agent is started again on demand, and while it restarts at the same
// generation. It is False with reason Pending while a generation is being
// set up, and False with the reason of the failure (SourceFailed,
// InstallFailed, StackSetupFailed, or a runtime's reason such as
// SpecInvalid) when that failed for good.
//
// Active is stackyard's own condition and says whether the agent serves
// right now:
//
//   - True, reason Running: the agent runs and is set up for the current
//     generation and agent instance; status.address is where it serves;
//   - False, reason Starting: the agent is starting, or being set up again
//     (a new pod after idling, a new source revision);
//   - False, reason Idle: the agent was stopped (the kubernetes runtime
//     scales its StatefulSet to zero); status.address is empty.
//
// Another controller that talks to the agent (the Update controller) waits
// for Serving: Ready and Active both True at the current generation.
// Deciding whether to run an operation at all only needs Ready.
//
// Stalled=True (with Ready=False and the same reason) means a retry cannot
// help until the spec or the program changes; the message names the field,
// e.g. `spec.stacks[0].config[2] key "app:x": ...`. A stalled generation is
// not retried and its agent is idled. Reconciling=True, with the reason of
// the last transient failure or Pending, means work is under way.
// status.observedGeneration is written when a generation is set up or has
// stalled.
//
// # When the agent runs
//
// The agent is kept active while any Update naming the Workspace in
// spec.workspaceName is not complete, while the current generation is not
// set up yet, and for Options.IdleAfter (default one minute) after the
// later of the agent becoming active and the last Update completing, or
// longer when Updates come in a rhythm: half as long again as the gap
// between the last two, when that is at most ten times IdleAfter, so a
// Stack under frequent changes finds its agent warm. Then it is idled
// (at once when other Workspaces wait for a place to run). The decision is recomputed from the Updates and the
// conditions on every reconcile, so an operator restart changes nothing.
// While an Update is in progress, a new generation of the Workspace waits
// for it to finish before the agent is restarted with it.
//
// # What was applied
//
// status.setup holds digests of what was applied to which agent instance
// (the runtime's Status.Instance, which changes when the agent's local
// state may have been lost): stacks are set up again only when
// spec.stacks, the source revision or the instance changed, and `pulumi
// install` runs again only for a new revision or instance. status.setup
// .revision records the revision set up. The record is in status, which
// only the operator may write, and is patched with the conditions: a
// setup costs no write of its own. (Releases before it kept the record in
// annotations under workspace.stackyard.dev/, which anyone allowed to
// edit the Workspace may write: a record the operator acts on belongs
// where only it writes. They are no longer read, and the next setup
// removes them.)
//
// Secret values (Secret-backed env, secret config) never reach status,
// events or logs: the controller never reads them, and the agent redacts
// them from its errors.
package workspace
