// Package local runs each Workspace's agent as a subprocess of the operator:
// the runtime of `stackyard dev` and of the integration tests, where no
// kubelet runs pods.
//
// # State directory
//
// Everything a Workspace needs lives under <root>/<namespace>/<name>/:
//
//	source/          the program, fetched by `stackyard agent init`
//	                 (absent for a local source, served where it is)
//	home/            PULUMI_HOME: plugins, credentials, workspace settings;
//	                 kept when the source is fetched again
//	source.json      what source/ holds: the source's fingerprint, the
//	                 revision fetched, and a random instance ID
//	init-result.json the outcome of the last fetch (see source.Report)
//	agent.token      the bearer token of the running agent (mode 0600)
//	agent.pid        the pid of the running agent
//
// Ensure fetches the source when source.json is missing or its fingerprint
// differs from the Workspace's source (git url/ref/dir, flux url/digest/dir,
// project info; a local directory is never fetched), then starts
// `stackyard-agent serve --workspace <program> --listen 127.0.0.1:0
// --token-file agent.token` with a fresh random token (the lean agent
// binary beside stackyard, Options.ServePath; `stackyard agent serve`
// without one), and reads the address from the agent's first line of
// output. A running agent is
// restarted when its launch settings (environment, program directory,
// source instance) change. Idle stops the process and keeps the directory;
// Delete stops it and removes the directory.
//
// # Pre-started agents
//
// Once a first agent start has been asked for, the runtime keeps
// Options.WarmAgents agents pre-started: `stackyard-agent serve
// --await-spec --listen 127.0.0.1:0`, with only the inherited variables
// (Options.InheritEnv), working in /. An agent start then takes one
// instead of launching a process: it writes the Workspace's bind.Spec
// (state directory, program directory, token file, verbosity, the whole
// environment) to the agent's stdin and closes it, and the agent chdirs to
// the state directory, replaces its environment and serves, printing its
// address as a launched one does; the pool starts a replacement in the
// background. The start and initialisation of a process leave the path of
// an update, though not its CPU. A bound agent serves its Workspace until
// it stops, like a launched one, and is never bound again; only the
// operator holds its stdin. Pre-started agents hold no place of
// MaxAgents; they are dismissed Options.WarmFor after the last agent start
// (their stdin closes empty, and they exit) and when the runtime closes,
// so that an operator restart or an idle operator starts none. An orphaned
// bound agent is recognised by its working directory. Variables read by
// the Go runtime or package initialisation at exec (GODEBUG, GOMAXPROCS,
// gRPC's logging) come from the operator for a bound agent, not from the
// Workspace; the CLI it runs gets the Workspace's all the same.
//
// # Source cache
//
// An immutable source (a git commit given by its SHA, a Flux artifact by
// its digest) is also kept under <root>/.source-cache/, per namespace, the
// oldest dropped past Options.SourceCacheEntries. Another Workspace of the
// namespace that deploys the same one copies the tree from there instead
// of fetching it: a burst of Stacks on one branch, or the stages of a
// pipeline, fetch each commit once. Workspaces that miss the same entry at
// once wait for each other's fetch rather than all going to the
// repository; one whose fetch fails passes the turn to the next, which
// fetches with its own credentials.
//
// # Processes
//
// Agents run in their own process group with a parent-death signal
// (SIGKILL, on Linux), so an operator that dies takes its agents with it.
// The runtime is a manager.Runnable: when the manager stops, every agent is
// stopped (SIGTERM, then SIGKILL after a grace period), so a restarted
// operator in the same process starts from a clean slate too. As a last
// resort, an agent recorded in agent.pid that is still running and serving
// the same state directory is killed before a new one starts. An agent that
// exits on its own is noticed (Options.OnExit) and started again by the next
// Ensure.
//
// An agent's Pulumi operations leave more behind than the agent: plugins
// the CLI starts in process groups of their own, still inside a resource
// operation when the operator is killed. The agent records each
// operation's process tree under processes/ in the state directory
// (internal/proc, named to it by STACKYARD_PROCESS_REGISTRY); before an
// agent starts, the runtime ends every tree recorded there, so that a
// retried Update never runs beside its interrupted predecessor's
// providers.
//
// # Environment
//
// An agent sees a few variables inherited from the operator (HOME, proxies,
// locale; see DefaultInheritEnv), PATH with Options.PathDirs first (pulumi,
// the language hosts and providers must be found there), PULUMI_HOME in the
// state directory, PULUMI_SKIP_UPDATE_CHECK, Options.Env, and then the
// Workspace's envFrom and env, read through the API server (Secrets and
// ConfigMaps of the Workspace's namespace only). Values are never logged.
package local
