// Package update holds the Update reconciler: it runs each Update's Pulumi
// operation (preview, up, refresh or destroy) once, through the agent of the
// Update's Workspace, and records the outcome in the Update's status, as the
// Pulumi Kubernetes Operator v2 does, without its known faults (an Update
// left Progressing forever after a restart, a reconcile worker held for the
// length of an operation).
//
// The package is split by concern: update_controller.go holds the Reconciler,
// its options and Reconcile; start.go the steps up to the start of an
// operation; operation.go the operation itself, talking to the agent;
// finish.go the recording of an outcome, interruption, expiry and deletion;
// outcome.go how an operation's end becomes a status; outputs.go the outputs
// Secret; plan.go a preview's saved plan and an up's plan; changes.go a
// preview's change summary; redact.go which secret output values are
// removed from messages; runner.go the registry of running operations;
// setup.go the watches; metrics.go the metrics hook.
//
// # Life of an Update
//
//	created ─► finalizer ─► Pending (workspace not serving, or busy with
//	another Update of this operator) ─► InProgress (startTime; operation
//	runs in a goroutine) ─► Complete, Failed=True|False (endTime, message,
//	outputs Secret) ─► finalizer removed ─► deleted after ttlAfterCompleted
//
// A Workspace serves when the Workspace controller says so (the
// Workspace's Serving): Ready=True, its stacks set up, and Active=True,
// its agent running, both for its current generation. Ready alone is not
// enough: an idle workspace stays Ready with its agent stopped, and the
// Workspace controller starts it again because an Update waits for it.
//
// Conditions follow the API's helpers: Progressing=True with reason Pending
// while waiting and InProgress while running; then Complete=True with
// Failed=False (reason Succeeded) or Failed=True with the failure's reason:
//
//   - UpdateConflict: the agent or the stack was busy with another
//     operation (agent reasons UpdateConflict and StackLocked); the Stack
//     controller retries.
//   - Interrupted: the operation did not run to its end because the
//     operator stopped, or the connection to the agent was lost or never
//     made; retrying is expected and safe.
//   - Cancelled: the Update was deleted while its operation ran.
//   - UpdateFailed: everything else (program error, resource failure, ...),
//     with the agent's reason at the start of the message.
//
// # No worker is held
//
// Reconcile never waits for an operation. Once the Update is recorded as
// InProgress, the operation runs in a goroutine tracked by a registry (one
// run per Update, one per Workspace); when it ends, its outcome is kept in
// memory and the Update is woken through a channel source. The next
// reconcile writes the outputs Secret and the status, through the same
// Patcher as every other status write, and only then removes the run from
// the registry. The outcome is written on the Update read live. Every other
// write of an Update's status carries the resourceVersion of the cached
// object it was decided on, so a decision made on a cache that does not
// show yet what a run wrote fails with a conflict and is made again: the
// outcome is written exactly once, and a stale cache can neither start an
// operation twice nor overwrite an outcome, while the Updates that wait
// (most of a burst) are never read from the API server.
//
// # Operator restarts
//
// The policy is: an operation belongs to the operator process that started
// it, and does not outlive it. When the manager stops, the registry cancels
// every running operation (the agent interrupts the Pulumi CLI with SIGINT,
// so the engine writes its state and releases the stack's lock) and the
// outcomes are not written, since the controllers have stopped. An operator
// killed outright has the same effect: the agent cancels an operation whose
// caller has gone. So at startup, an Update that is Progressing with reason
// InProgress (or any reason other than Pending, such as the v2 operator's
// "Progressing") and has no run in this process was interrupted. It is
// marked Complete=True, Failed=True, reason Interrupted, message "the
// operator stopped while the operation ran; it will be retried", endTime
// now. The Stack controller retries it with a new Update; if a killed CLI
// left its lock or pending operations behind, the agent's recovery clears
// them before that next operation. No Update stays Progressing once an
// operator runs again.
//
// # Cancellation
//
// Deleting an Update whose operation runs cancels the operation's context;
// the agent interrupts the CLI gracefully. The finalizer is removed only
// after the run has stopped and its outcome (reason Cancelled) is written.
//
// # Outputs
//
// The stack outputs of an up or refresh are written to an immutable Secret
// named "<update>-stack-outputs", owned by the Update (so it is deleted with
// it), with one key per output (the name with characters a key may not hold
// replaced by "_") whose value is the output's JSON text, secret outputs in
// clear text. The annotation "pulumi.com/secrets" lists, as a JSON array,
// the keys of the secret outputs. Name, keys and annotation are those of the
// Pulumi Kubernetes Operator v2. status.outputs names the Secret.
//
// A preview has no outputs and no Secret; what it found goes to the status:
// status.changes (counts per operation kind, for every operation type) and
// status.resourceChanges (each resource it would change: URN, type,
// operation and the names of the properties that cause it, never their
// values; at most 500).
//
// # Plans
//
// Two stackyard extensions hold an up to what a preview showed. A preview
// with spec.savePlan asks the agent to save the update plan (`pulumi
// preview --save-plan`) and writes it to an immutable Secret
// "<update>-plan", owned by the Update, under the key "plan", named in
// status.plan (plan.go). An up with spec.planSecret reads that key before
// it starts (a missing Secret or key fails the Update without running it)
// and sends it with the request: the agent runs `pulumi up --plan`, which
// fails, with the agent reason PlanViolation at the start of the message,
// where the update would do anything the plan does not allow.
//
// # Secrets
//
// Secret output values reach only the outputs Secret. The status message,
// events and logs carry the agent's messages (already redacted by the
// agent) with every secret output value scrubbed again; engine events are
// logged at debug level by type, URN and operation only.
package update
