package cloudapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autov1alpha1 "github.com/stackyard/stackyard/api/auto/v1alpha1"
	"github.com/stackyard/stackyard/api/pulumi/shared"
	pulumiv1 "github.com/stackyard/stackyard/api/pulumi/v1"
	"github.com/stackyard/stackyard/internal/authn"
)

const (
	shaA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// t0 is the time the test histories start at.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds, as status stores it.
func at(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }

// record is a finished operation started at second s, taking 10 seconds.
func record(name string, typ autov1alpha1.UpdateType, state shared.StackUpdateStateMessage, commit string, s int) shared.UpdateRecord {
	return shared.UpdateRecord{
		Name: name, Type: typ, State: state, Commit: commit, StartTime: at(s), EndTime: at(s + 10),
		Message: string(state), Changes: map[string]int64{"same": 2, "create": 1},
	}
}

// newestFirst is what the Stack controller writes: status.history is
// newest first.
func newestFirst(recs ...shared.UpdateRecord) []shared.UpdateRecord {
	out := make([]shared.UpdateRecord, len(recs))
	for i, r := range recs {
		out[len(recs)-1-i] = r
	}
	return out
}

func names(ops []operation) []string {
	var out []string
	for _, op := range ops {
		out = append(out, op.name)
	}
	return out
}

func TestOperationsOf(t *testing.T) {
	stack := &pulumiv1.Stack{Status: pulumiv1.StackStatus{
		History: newestFirst(
			record("up-1", autov1alpha1.UpType, shared.SucceededStackStateMessage, shaA, 0),
			record("pre-2", autov1alpha1.PreviewType, shared.SucceededStackStateMessage, shaB, 100),
		),
		// A lastUpdate the history lacks (a Stack from before history was
		// kept) still counts; one the history has is not repeated.
		LastUpdate: &shared.StackUpdateState{
			Name: "up-0", Type: autov1alpha1.UpType, State: shared.FailedStackStateMessage,
			LastAttemptedCommit: shaA, LastResyncTime: at(-50),
		},
		CurrentUpdate: &shared.CurrentStackUpdate{Name: "up-3", Commit: shaB},
	}}
	running := &autov1alpha1.Update{
		Spec:   autov1alpha1.UpdateSpec{Type: autov1alpha1.UpType},
		Status: autov1alpha1.UpdateStatus{StartTime: at(200)},
	}

	ops := history(operationsOf(stack, running))
	if got, want := names(ops), []string{"up-0", "up-1", "pre-2", "up-3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("operations = %v, want %v (oldest first)", got, want)
	}
	last := ops[3]
	if last.result != ResultInProgress || last.commit != shaB || !last.start.Equal(t0.Add(200*time.Second)) {
		t.Errorf("running operation = %+v, want in-progress on %s from t0+200s", last, shaB)
	}

	// Without its Update object, the running operation's kind follows
	// spec.preview and its start is unknown: it sorts last.
	stack.Spec.Preview = true
	ops = history(operationsOf(stack, nil))
	if last := ops[len(ops)-1]; last.name != "up-3" || !last.preview() || !last.start.IsZero() {
		t.Errorf("running operation without its Update = %+v, want a preview with no start, last", last)
	}

	stack.Status.LastUpdate.Name = "up-1"
	stack.Status.CurrentUpdate = nil
	if got, want := names(history(operationsOf(stack, nil))), []string{"up-1", "pre-2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("operations = %v, want %v (lastUpdate already in the history)", got, want)
	}
}

func TestHistoryMergesAndNumbers(t *testing.T) {
	// Two Stacks deploy one Pulumi stack: one previews, one updates. The
	// same Update may appear in both (it cannot in practice, but a merge
	// must not count it twice), and two operations start in one second.
	previewer := []operation{
		fromRecord(record("pre-1", autov1alpha1.PreviewType, shared.SucceededStackStateMessage, shaA, 0)),
		fromRecord(record("pre-3", autov1alpha1.PreviewType, shared.SucceededStackStateMessage, shaB, 100)),
	}
	updater := []operation{
		fromRecord(record("up-2", autov1alpha1.UpType, shared.SucceededStackStateMessage, shaA, 50)),
		fromRecord(record("up-4", autov1alpha1.UpType, shared.FailedStackStateMessage, shaB, 200)),
		fromRecord(record("ref-5", autov1alpha1.RefreshType, shared.SucceededStackStateMessage, shaB, 200)),
		fromRecord(record("pre-3", autov1alpha1.PreviewType, shared.SucceededStackStateMessage, shaB, 100)),
	}
	ops := history(previewer, updater)

	base := t0.Unix()
	want := []struct {
		name    string
		version int64
	}{
		{"pre-1", 0},             // no update before it
		{"up-2", base + 50},      // its start
		{"pre-3", base + 50},     // the version it previewed
		{"ref-5", base + 200},    // same second as up-4, sorted by name
		{"up-4", base + 200 + 1}, // raised above ref-5
	}
	if len(ops) != len(want) {
		t.Fatalf("operations = %v, want %d", names(ops), len(want))
	}
	for i, w := range want {
		if ops[i].name != w.name || ops[i].version != w.version {
			t.Errorf("operation %d = %s version %d, want %s version %d", i, ops[i].name, ops[i].version, w.name, w.version)
		}
	}
	if got := latestVersion(ops); got != base+201 {
		t.Errorf("latestVersion = %d, want %d", got, base+201)
	}
}

// decode turns a value into the generic JSON a client (an expr
// expression) sees.
func decode(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestUpdatesShape(t *testing.T) {
	ops := history([]operation{
		fromRecord(record("up-1", autov1alpha1.UpType, shared.SucceededStackStateMessage, shaA, 0)),
		fromRecord(record("pre-2", autov1alpha1.PreviewType, shared.SucceededStackStateMessage, shaB, 100)),
		fromRecord(record("des-3", autov1alpha1.DestroyType, shared.FailedStackStateMessage, "main@sha1:"+shaB, 200)),
	})
	var infos []UpdateInfo
	for _, op := range updates(ops) {
		infos = append(infos, info(op, KindPreview))
	}
	got := decode(t, UpdatesResponse{Updates: infos})
	want := decode(t, map[string]any{"updates": []any{
		map[string]any{
			"kind": "destroy", "startTime": t0.Unix() + 200, "endTime": t0.Unix() + 210, "message": "failed",
			"environment": map[string]any{"git.head": shaB}, "config": map[string]any{}, "result": "failed",
			"version": t0.Unix() + 200, "resourceChanges": map[string]any{"same": 2, "create": 1},
		},
		map[string]any{
			"kind": "update", "startTime": t0.Unix(), "endTime": t0.Unix() + 10, "message": "succeeded",
			"environment": map[string]any{"git.head": shaA}, "config": map[string]any{}, "result": "succeeded",
			"version": t0.Unix(), "resourceChanges": map[string]any{"same": 2, "create": 1}, "resourceCount": 3,
		},
	}})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("updates =\n%v\nwant (newest first, no previews)\n%v", got, want)
	}
}

func TestPreviewsShape(t *testing.T) {
	ops := history([]operation{
		fromRecord(record("pre-0", autov1alpha1.PreviewType, shared.SucceededStackStateMessage, shaA, -100)),
		fromRecord(record("up-1", autov1alpha1.UpType, shared.SucceededStackStateMessage, shaA, 0)),
		fromRecord(record("pre-2", autov1alpha1.PreviewType, shared.FailedStackStateMessage, shaA, 100)),
		{name: "pre-3", typ: autov1alpha1.PreviewType, result: ResultInProgress, commit: shaB, start: t0.Add(200 * time.Second)},
	})
	got := decode(t, serviceResponse(previews(ops), KindPreviewUpdate, latestVersion(ops), query{}))
	v := t0.Unix()
	stackyard := map[string]any{"name": "stackyard", "githubLogin": "stackyard", "avatarUrl": ""}
	want := decode(t, map[string]any{
		"updates": []any{
			map[string]any{
				"info": map[string]any{
					"kind": "Pupdate", "startTime": v + 100, "endTime": v + 110, "message": "failed",
					"environment": map[string]any{"git.head": shaA}, "config": map[string]any{}, "result": "failed",
					"version": v, "resourceChanges": map[string]any{"same": 2, "create": 1},
				},
				"updateID": "pre-2", "version": v, "latestVersion": v, "requestedBy": stackyard,
			},
			map[string]any{
				"info": map[string]any{
					"kind": "Pupdate", "startTime": v + 200, "endTime": 0, "message": "",
					"environment": map[string]any{"git.head": shaB}, "config": map[string]any{}, "result": "in-progress",
					"version": v,
				},
				"updateID": "pre-3", "version": v, "latestVersion": v, "requestedBy": stackyard,
			},
		},
		"itemsPerPage": 2, "total": 2,
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("previews =\n%v\nwant (oldest first, only those since up-1)\n%v", got, want)
	}

	// A stack whose last operation is an update has no previews.
	none := decode(t, serviceResponse(previews(ops[:2]), KindPreviewUpdate, latestVersion(ops[:2]), query{}))
	if want := decode(t, map[string]any{"updates": []any{}, "itemsPerPage": 0, "total": 0}); !reflect.DeepEqual(none, want) {
		t.Errorf("previews after an update = %v, want %v", none, want)
	}
}

func TestGitHead(t *testing.T) {
	for rev, want := range map[string]string{
		shaA:                      shaA,
		"main@sha1:" + shaA:       shaA,
		"sha1:" + shaA:            shaA,
		"v1.2.0@sha1:" + shaA:     shaA,
		"3":                       "", // a Program's revision
		"sha256:" + shaA + "0000": "",
		"":                        "",
		strings.ToUpper(shaA):     "",
	} {
		if got := gitHead(rev); got != want {
			t.Errorf("gitHead(%q) = %q, want %q", rev, got, want)
		}
	}
}

func TestDeployedBy(t *testing.T) {
	name := stackName{org: "acme", project: "website", stack: "dev"}
	stack := func(spec, project string) *pulumiv1.Stack {
		s := &pulumiv1.Stack{Spec: shared.StackSpec{Stack: spec}}
		if project != "" {
			s.Status.ProjectInfo = &shared.ProjectInfo{Name: project}
		}
		return s
	}
	for _, tc := range []struct {
		spec, project string
		want          bool
	}{
		{"acme/website/dev", "", true},
		{"acme/website/dev", "other", true}, // the spec names the project
		{"acme/other/dev", "website", false},
		{"other/website/dev", "website", false},
		{"acme/website/prod", "website", false},
		{"acme/dev", "website", true},
		{"acme/dev", "", false}, // project not known yet
		{"other/dev", "website", false},
		{"dev", "website", true}, // the backend's default organization
		{"dev", "other", false},
		{"dev", "", false},
		{"a/b/c/d", "website", false},
	} {
		if got := name.deployedBy(stack(tc.spec, tc.project)); got != tc.want {
			t.Errorf("spec.stack %q, project %q: deployedBy = %v, want %v", tc.spec, tc.project, got, tc.want)
		}
	}
}

func TestPage(t *testing.T) {
	items := []int{1, 2, 3, 4, 5}
	for _, tc := range []struct {
		page, size int
		want       []int
	}{
		{0, 0, items},
		{1, 0, items},
		{0, 2, items}, // page 0 is every item, as in Pulumi Cloud
		{1, 1, []int{1}},
		{2, 2, []int{3, 4}},
		{3, 2, []int{5}},
		{4, 2, []int{}},
	} {
		if got := page(items, tc.page, tc.size); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("page %d of %d = %v, want %v", tc.page, tc.size, got, tc.want)
		}
	}
}

func TestParseQuery(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  query
		code  int
	}{
		{query: "", want: query{}},
		{query: "pageSize=1", want: query{page: 1, pageSize: 1}},
		{query: "pageSize=1&page=0", want: query{pageSize: 1}},
		{query: "pageSize=5&page=2&namespace=ns&output-type=service", want: query{page: 2, pageSize: 5, namespace: "ns", service: true}},
		{query: "output-type=cli", want: query{}},
		{query: "pageSize=-1", code: http.StatusBadRequest},
		{query: "page=x", code: http.StatusBadRequest},
		{query: "pageSize=99999999999", code: http.StatusBadRequest},
		{query: "output-type=json", code: http.StatusBadRequest},
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/stacks/o/p/s/updates?"+tc.query, nil)
		got, err := parseQuery(r)
		if tc.code != 0 {
			if he, ok := err.(*authn.Error); !ok || he.Code != tc.code {
				t.Errorf("%q: error %v, want code %d", tc.query, err, tc.code)
			}
			continue
		}
		got.name = stackName{}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.query, got, err, tc.want)
		}
	}
}
