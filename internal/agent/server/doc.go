// Package server implements the workspace agent's gRPC AutomationService
// (internal/agent/proto) on the real Pulumi engine, through the Automation
// API over one project directory.
//
// The package is split by concern: server.go holds the Server, its options
// and the one-call-at-a-time discipline; stack.go the stack selection and
// information calls; config.go SetAllConfig and config_values.go the
// reading and validation of its items; operations.go Preview, Up, Refresh
// and Destroy and the runner they share; events.go the forwarding of engine
// events; results.go the Result; state.go what an export of the state
// shows (outputs, pending operations); warm.go what a warm agent
// remembers; ahead.go the commands started before they are asked for;
// settings.go where the stack settings file is; errors.go the
// classification of failures into agenterr reasons; recovery.go the
// repair of interrupted runs; command.go the process handling of the CLI
// (on internal/proc).
//
// # Cancellation
//
// When the caller cancels an operation's stream, or the agent shuts down
// (Server.Shutdown, called on SIGTERM), the CLI gets SIGINT: the engine
// stops starting steps, asks providers to cancel the running ones, writes
// the state and releases the stack lock. If it has not exited after the
// grace period, the CLI and every process below it (language host,
// providers) are killed. The CLI is also started with a parent-death signal,
// so a killed agent takes its CLI with it rather than leaving an update
// running unsupervised.
//
// # Processes
//
// No process outlives the CLI run that started it. Each run is a proc.Tree:
// the CLI leads a session of its own and carries the tree's mark in its
// environment, and so does every plugin it starts, although the CLI starts
// each in a process group of its own. When a run ends, on success, failure
// or cancellation, what it left running gets SIGTERM and, after a few
// seconds, SIGKILL: a failed `pulumi up` leaves its providers running.
//
// A killed agent's CLI dies with it, but its providers do not, and they may
// be in the middle of a resource operation. Trees are therefore recorded in
// Options.ProcessRegistry while they run, and New ends (SIGKILL) the
// processes of every tree recorded there before the agent serves: nothing,
// above all not the recovery below of the run that was interrupted, runs
// while a predecessor's provider still changes resources.
//
// # Locks
//
// A CLI that was killed leaves its lock behind, and every later operation
// fails with "the stack is currently locked". The agent clears such a lock
// only when its holder is provably gone: the lock was taken on this host
// (same hostname; in Kubernetes the pod name, which a restarted pod keeps)
// and its pid is either not running (or a zombie) or now belongs to a
// process that started after the lock was taken (pids are reused after a
// container restart). A lock from another host, or from a live process,
// is never cleared: the operation fails with reason StackLocked. Because
// `pulumi cancel` removes all of a stack's locks, locks are cleared only
// when every one of them is stale. The operation is then retried once, and
// the Result's Recovery lists the cleared locks with the reason each holder
// was judged gone. Every repair is also sent on the stream as a Recovery
// message as it begins and as it ends (repairLog), so that a caller whose
// stream breaks before the Result, even in the middle of a repair (this
// agent killed in turn), still learns of it.
//
// # Pending operations
//
// A killed CLI may also leave pending operations in the state: resources it
// had started to create, update or delete. The engine drops pending updates
// and deletes on the next update, but keeps pending creates until a human
// resolves them, warning on every run (an update does not fail on them, in
// non-interactive mode or otherwise). Before an operation the agent
// exports the state, unless it knows the state to be clean (see Warm
// agent), and reports any pending operations in Result.PendingOperations.
// Before a mutating operation (up, refresh, destroy; not previews) it
// clears them with the engine's own mechanism,
// `pulumi refresh --clear-pending-creates`, which drops the pending creates,
// writes a snapshot without the other pending operations, and brings the
// state in line with the real resources. Recovery lists the operations
// being cleared (ClearingPendingOperations, sent before the clearing
// starts), then the cleared ones, and the method. A pending create may
// stand for a resource that
// was in fact created and is now unmanaged; the Result is where the
// operator surfaces that to a human.
//
// # Damaged backend files
//
// A file:// backend stores each blob (checkpoint, lock, history entry)
// beside an attributes sidecar, "<blob>.attrs", which its blob library
// writes in place before it renames the blob's new content into place. A
// CLI killed between the two leaves the sidecar empty, and from then on
// every read of that blob fails with "EOF": the stack cannot be exported,
// updated, selected or even cancelled. When selecting the stack or an
// operation fails that way, the agent looks under the backend's .pulumi directory for sidecars that hold no
// JSON object, removes them (they hold only a content type and a digest;
// without one the blob is read as it is) and runs the call once more,
// unless the engine had begun a resource step (then the next call finds
// the backend readable). An operation's Recovery.RepairedFiles lists them.
//
// # Warm agent
//
// Every CLI command costs a process start and a read of the backend, and
// the Update and Workspace controllers call SelectStack, SetAllConfig and
// an operation for every update. An agent process therefore remembers
// what its own calls established, in memory, and skips the commands
// whose answer it already has (warm.go); each command the agent runs is
// logged at verbosity 1 with its name, never its arguments:
//
//   - SelectStack with create set runs `pulumi stack select --create`,
//     one command where the Automation API's UpsertStack runs two for a
//     new stack (a select that fails, then `stack init`). A stack it has
//     just created has an empty state, known to hold no pending
//     operation.
//
//   - SelectStack with the same request as the selection in place runs no
//     `pulumi stack select`, as long as the stack's settings files (the
//     project file and Pulumi.<stack>.yaml, read and digested on each
//     call) are unchanged. Every other command the agent runs names the
//     stack, so the CLI's own current stack does not matter. A stack
//     removed behind the agent's back fails the next call with
//     StackNotFound, which makes the agent forget all it knew: the
//     SelectStack after that selects (or creates) the stack with the CLI
//     again. The summary, a `pulumi stack ls`, is left out on request
//     (skip_summary), as Info's is (skip_stack).
//
//   - SetAllConfig whose resolved items (secret values included, digested,
//     never logged) are those it last applied to the stack, with the
//     settings files as that left them, writes nothing: setting them again
//     would change nothing. Otherwise values that are not secret are
//     written into the stack settings file directly, where the CLI keeps
//     it (stackConfigDir and the project file's extension included), as
//     set-all would write them; only secrets, which need the secrets
//     provider, go through `pulumi config set-all`.
//
//   - The export before an operation is skipped while the state is known
//     to hold no pending operation: the agent exported it, or cleared
//     what it found, and every operation since ended without error. A
//     failure or cancellation, a new agent process, or a removed stack
//     makes the next operation export again, which is what recovers from
//     an agent killed mid-run; except that a new agent over the same
//     project directory, backend and PULUMI_HOME (the local runtime's,
//     after it fetched a new commit) takes over what the previous one
//     recorded there when its last operation ended (carried.go): that the
//     state was clean, cleared on disk before each mutating operation
//     begins, so a run killed midway records nothing; and the stack
//     settings' secrets key material, so that the new project directory
//     needs no export to adopt it. Another process's run interrupted in
//     between (someone's own `pulumi up` on the same stack) is seen
//     afterwards: the engine warns about it during the update or destroy,
//     and the export that reads an up's or refresh's outputs lists what is
//     left; the Result then reports those pending operations, and the
//     next operation clears them.
//
//   - An up's outputs are taken from its own engine events: the root
//     stack resource's outputs, as the engine reports them once the
//     program has run, serialized as the state holds them, secrets
//     encrypted. The events end before the CLI exits, so they are all
//     there when the Automation API asks for the outputs. `pulumi stack
//     output --show-secrets` runs only when some output is secret. The
//     summary is then the agent's own (kind, result, times, the change
//     counts of the engine's summary event, and the message the CLI
//     records: the request's, else the title of the program's commit), so
//     the Automation API's `pulumi stack history` is answered without
//     running it (ahead.go). An up that succeeded leaves no pending
//     operation of its own; when the engine warned that the state held
//     another run's, or the events showed no outputs, the outputs are read
//     as for other operations instead:
//
//   - Outputs are read from `pulumi stack export`, plus `pulumi stack
//     output --show-secrets` only when some output is secret, instead of
//     the Automation API's two `pulumi stack output` runs
//     (stateWorkspace), with the same values and secret marking; that
//     export is also what tells the agent whether an operation left
//     pending operations. The summary the Automation API reads after the
//     outputs, `pulumi stack history`, is started beside that export
//     rather than after it (ahead.go).
//
//   - The CLI's version, which the Automation API needs, is read once per
//     binary and kept in the user's cache directory (cliVersion), not asked
//     with `pulumi version` at every agent start.
//
// The agent's own exports leave secrets encrypted: they need no secrets
// provider, which spares a passphrase's key derivation or a KMS call. So
// an up on a warm agent runs `pulumi up` alone, plus one `pulumi config
// set-all` when a secret value changed and one `pulumi stack output` when
// an output is secret; a new stack adds one `pulumi stack select
// --create`.
//
// # Secrets
//
// Secret config values and secret outputs are remembered in a redact.Set and
// removed from every message, event and log line the agent produces. Secret
// outputs are sent only when the request sets show_secrets.
package server
