package cloudapi

// The JSON shapes served, with Pulumi Cloud's field names.

// Update kinds and results as Pulumi Cloud spells them.
const (
	// KindUpdate is a `pulumi up`.
	KindUpdate = "update"
	// KindPreview is a `pulumi preview`, in the CLI shape.
	KindPreview = "preview"
	// KindRefresh is a `pulumi refresh`.
	KindRefresh = "refresh"
	// KindDestroy is a `pulumi destroy`.
	KindDestroy = "destroy"
	// KindPreviewUpdate is a preview of an update, as the previews
	// endpoint reports it.
	KindPreviewUpdate = "Pupdate"

	// ResultSucceeded is an operation that finished without error.
	ResultSucceeded = "succeeded"
	// ResultFailed is an operation that finished with an error.
	ResultFailed = "failed"
	// ResultInProgress is an operation still running.
	ResultInProgress = "in-progress"

	// GitHeadKey is the environment key of the commit an operation ran on.
	GitHeadKey = "git.head"
)

// UpdateInfo is one operation in Pulumi's CLI shape (its apitype.UpdateInfo):
// the elements of the updates endpoint's list, and the info of the service
// shape's.
type UpdateInfo struct {
	// Kind is update, refresh or destroy (preview, or Pupdate in the
	// previews endpoint).
	Kind string `json:"kind"`
	// StartTime is when the operation started, in Unix seconds.
	StartTime int64 `json:"startTime"`
	// Message is the operation's message: the outcome recorded by
	// stackyard, e.g. the error of a failed update.
	Message string `json:"message"`
	// Environment holds GitHeadKey, the commit the operation ran on, when
	// one is known.
	Environment map[string]string `json:"environment"`
	// Config is always empty: configuration values are not served.
	Config map[string]any `json:"config"`
	// Result is succeeded, failed or in-progress.
	Result string `json:"result"`
	// EndTime is when the operation finished, in Unix seconds; 0 while it
	// runs.
	EndTime int64 `json:"endTime"`
	// Version orders the operations: see the package documentation.
	Version int64 `json:"version"`
	// ResourceChanges counts the resources per operation (create, update,
	// delete, replace, same, ...).
	ResourceChanges map[string]int64 `json:"resourceChanges,omitempty"`
	// ResourceCount is the number of resources the stack holds after a
	// successful update, refresh or destroy, counted from ResourceChanges.
	ResourceCount int64 `json:"resourceCount,omitempty"`
}

// UpdatesResponse is the updates endpoint's answer in the CLI shape.
type UpdatesResponse struct {
	// Updates are the operations, newest first.
	Updates []UpdateInfo `json:"updates"`
}

// ServiceUpdate is one operation in Pulumi Cloud's service shape.
type ServiceUpdate struct {
	// Info is the operation.
	Info UpdateInfo `json:"info"`
	// UpdateID identifies the operation: the name of the Update object that
	// ran it.
	UpdateID string `json:"updateID"`
	// Version is Info.Version.
	Version int64 `json:"version"`
	// LatestVersion is the version of the stack's newest update, refresh or
	// destroy.
	LatestVersion int64 `json:"latestVersion"`
	// RequestedBy is always stackyard, which runs every operation.
	RequestedBy UserInfo `json:"requestedBy"`
}

// UserInfo is Pulumi Cloud's display information of a user.
type UserInfo struct {
	// Name is the display name.
	Name string `json:"name"`
	// GithubLogin is the login name.
	GithubLogin string `json:"githubLogin"`
	// AvatarURL is the address of an avatar image; empty here.
	AvatarURL string `json:"avatarUrl"`
}

// ServiceUpdatesResponse is an answer in the service shape: the previews
// endpoint's, and the updates endpoint's with output-type=service.
type ServiceUpdatesResponse struct {
	// Updates are the operations of the page.
	Updates []ServiceUpdate `json:"updates"`
	// ItemsPerPage is the page size asked for, or Total when none was.
	ItemsPerPage int `json:"itemsPerPage"`
	// Total counts the operations of every page.
	Total int `json:"total"`
}

// ErrorResponse is Pulumi Cloud's error body.
type ErrorResponse struct {
	// Code is the HTTP status code.
	Code int `json:"code"`
	// Message says what went wrong.
	Message string `json:"message"`
}

// requester is who RequestedBy names.
var requester = UserInfo{Name: "stackyard", GithubLogin: "stackyard"}
