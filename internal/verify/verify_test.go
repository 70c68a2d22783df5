package verify

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stackyard/stackyard/internal/redact"
)

// TestEvaluate judges decoded answers with the conditions of Argo
// Rollouts' examples, rewritten in CEL.
func TestEvaluate(t *testing.T) {
	tests := []struct {
		name             string
		success, failure string
		answer           string
		want             string
		wantMessage      string
	}{
		{name: "no condition: any value passes", answer: `{"ok":false}`, want: Successful},
		{name: "success true", success: "result.ok == true", answer: `{"ok":true}`, want: Successful},
		{name: "success false fails", success: "result.ok == true", answer: `{"ok":false}`, want: Failed, wantMessage: "successCondition is false"},
		{name: "failure true fails", failure: "result.errors > 0", answer: `{"errors":2}`, want: Failed, wantMessage: "failureCondition is true"},
		{name: "failure false passes", failure: "result.errors > 0", answer: `{"errors":0}`, want: Successful},
		{name: "failure wins over success", success: "result.ok", failure: "result.errors > 0", answer: `{"ok":true,"errors":1}`, want: Failed},
		{name: "both set, neither true: failed (Argo: Inconclusive)", success: "result.ok", failure: "result.errors > 0", answer: `{"ok":false,"errors":0}`, want: Failed},
		{name: "int compares with double", success: "result.rate < 0.5 && result.count == 3.0", answer: `{"rate":0,"count":3}`, want: Successful},
		{name: "double compares with int", success: "result.rate >= 1", answer: `{"rate":1.5}`, want: Successful},
		{name: "size of a list", success: "size(result) > 0", answer: `[1,2]`, want: Successful},
		{name: "has() on a missing field", success: "has(result.ok) && result.ok", answer: `{"other":1}`, want: Failed},
		{name: "missing field is an error", success: "result.ok", answer: `{"other":1}`, want: Error, wantMessage: "successCondition: no such key: ok"},
		{name: "string functions", success: "result.version.startsWith('v2')", answer: `{"version":"v2.1.0"}`, want: Successful},
		{name: "a plain answer is a string", success: "result == 'ok'", answer: `ok`, want: Successful},
		// The translations of Argo's expressions in docs/change-management.md.
		{name: "in a list", success: "result.status in ['ok', 'degraded']", answer: `{"status":"degraded"}`, want: Successful},
		{name: "int()", success: "int(result) > 3", answer: `7`, want: Successful},
		{name: "double()", success: "double(result) < 0.5", answer: `0`, want: Successful},
		{name: "null element", success: "size(result) > 0 && result[0] != null", answer: `[null]`, want: Failed},
		{name: "all()", success: "result.all(x, x > 0)", answer: `[1,2.5]`, want: Successful},
		{name: "default", success: "(has(result.x) ? result.x : 0) == 0", answer: `{}`, want: Successful},
		{name: "lowerAscii", success: "result.name.lowerAscii().startsWith('v2')", answer: `{"name":"V2.0"}`, want: Successful},
		{name: "dyn that is no bool at run time", success: "result", answer: `"yes"`, want: Error, wantMessage: "successCondition: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conds, err := Compile(tt.success, tt.failure)
			if err != nil {
				t.Fatal(err)
			}
			value, err := Select([]byte(tt.answer), "")
			if err != nil {
				t.Fatal(err)
			}
			phase, msg := conds.Evaluate(context.Background(), value)
			if phase != tt.want || !strings.Contains(msg, tt.wantMessage) {
				t.Errorf("Evaluate(%s) = %s %q, want %s %q", tt.answer, phase, msg, tt.want, tt.wantMessage)
			}
		})
	}
}

// TestCompileRefuses: a condition that cannot work fails the check once,
// naming the field, instead of each measurement.
func TestCompileRefuses(t *testing.T) {
	tests := []struct {
		name, success, failure, want string
	}{
		{name: "syntax", success: "result.ok ==", want: "successCondition"},
		{name: "Argo's expr len()", success: "len(result) > 0", want: "undeclared reference to 'len'"},
		{name: "not a bool", failure: "size(result)", want: "failureCondition \"size(result)\": yields int, not a bool"},
		{name: "unknown variable", success: "response.ok", want: "undeclared reference to 'response'"},
		{name: "too long", success: strings.Repeat("true && ", 600) + "true", want: "successCondition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.success, tt.failure)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compile(%q, %q) = %v, want an error containing %q", tt.success, tt.failure, err, tt.want)
			}
		})
	}
}

// TestCostLimit: a condition that would run for long is stopped.
func TestCostLimit(t *testing.T) {
	conds, err := Compile("result.all(a, result.all(b, result.all(c, a + b + c >= 0)))", "")
	if err != nil {
		t.Fatal(err)
	}
	list := make([]any, 500)
	for i := range list {
		list[i] = int64(i)
	}
	phase, msg := conds.Evaluate(context.Background(), list)
	if phase != Error || !strings.Contains(msg, "cost") {
		t.Errorf("Evaluate = %s %q, want an Error about the cost limit", phase, msg)
	}
}

func TestSelect(t *testing.T) {
	tests := []struct {
		name, answer, path string
		want               string
		wantErr            string
	}{
		{name: "whole document", answer: `{"a":1}`, want: `map[a:1]`},
		{name: "Argo's form", answer: `{"data":{"ok":true}}`, path: "{$.data.ok}", want: "true"},
		{name: "without braces", answer: `{"data":{"ok":true}}`, path: "$.data.ok", want: "true"},
		{name: "whole numbers are ints", answer: `{"n":3}`, path: "{$.n}", want: "3 int64"},
		{name: "fractions are doubles", answer: `{"n":0.25}`, path: "{$.n}", want: "0.25 float64"},
		{name: "several matches make a list", answer: `{"items":[{"v":1},{"v":2}]}`, path: "{$.items[*].v}", want: "[1 2]"},
		{name: "a filter", answer: `{"updates":[{"kind":"update","result":"succeeded"},{"kind":"preview","result":"failed"}]}`,
			path: `{$.updates[?(@.kind=="update")].result}`, want: "succeeded"},
		{name: "the Kargo templates' path", answer: `{"updates":[{"environment":{"git.head":"abc"}}]}`,
			path: `{$.updates[0].environment.git\.head}`, want: "abc"},
		{name: "missing key", answer: `{"a":1}`, path: "{$.b}", wantErr: "b is not found"},
		{name: "empty list", answer: `{"items":[]}`, path: "{$.items[*]}", wantErr: "selects nothing"},
		{name: "not JSON with a path", answer: `<html>`, path: "{$.a}", wantErr: "not JSON"},
		{name: "trailing data", answer: `{"a":1} {"b":2}`, path: "{$.a}", wantErr: "data after"},
		{name: "bad path", answer: `{"a":1}`, path: "{$.a[}", wantErr: "jsonPath"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Select([]byte(tt.answer), tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Select = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := fmt.Sprint(got)
			if strings.Contains(tt.want, " int64") || strings.Contains(tt.want, " float64") {
				s = fmt.Sprintf("%v %T", got, got)
			}
			if s != tt.want {
				t.Errorf("Select = %s, want %s", s, tt.want)
			}
		})
	}
}

// TestAssess counts measurements as Argo Rollouts does.
func TestAssess(t *testing.T) {
	tests := []struct {
		name                string
		count, failureLimit int32
		successes, failures int32
		want                string
	}{
		{name: "nothing yet", count: 3, want: Running},
		{name: "default count is one", successes: 1, want: Succeeded},
		{name: "one failure, no limit", count: 3, successes: 1, failures: 1, want: Failed},
		{name: "within the limit, still counting", count: 5, failureLimit: 2, successes: 1, failures: 2, want: Running},
		{name: "over the limit before the count", count: 5, failureLimit: 2, failures: 3, want: Failed},
		{name: "count reached within the limit", count: 3, failureLimit: 1, successes: 2, failures: 1, want: Succeeded},
		{name: "Argo: failures within the limit still pass", count: 1, failureLimit: 2, failures: 1, want: Succeeded},
		{name: "all passed", count: 3, successes: 3, want: Succeeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{Count: tt.count, FailureLimit: tt.failureLimit}
			if got := p.Assess(tt.successes, tt.failures); got != tt.want {
				t.Errorf("Assess(%d, %d) = %s, want %s", tt.successes, tt.failures, got, tt.want)
			}
		})
	}
}

func TestNext(t *testing.T) {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	last := start.Add(time.Minute)
	tests := []struct {
		name   string
		policy Policy
		last   *time.Time
		want   time.Time
	}{
		{name: "first, no delay", want: start},
		{name: "first, after the delay", policy: Policy{InitialDelay: 30 * time.Second}, want: start.Add(30 * time.Second)},
		{name: "next, default interval", last: &last, want: last.Add(DefaultInterval)},
		{name: "next, interval", policy: Policy{Interval: time.Second, InitialDelay: time.Hour}, last: &last, want: last.Add(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.Next(start, tt.last); !got.Equal(tt.want) {
				t.Errorf("Next = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestMeasureHTTP takes measurements of a loopback server.
func TestMeasureHTTP(t *testing.T) {
	const token = "s3cret-token-value"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/echo":
			// Echoes the header, as a careless endpoint might.
			fmt.Fprintf(w, `{"ok":true,"auth":%q,"method":%q,"body":%q,"type":%q}`,
				r.Header.Get("Authorization"), r.Method, body, r.Header.Get("Content-Type"))
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"auth":%q}`, r.Header.Get("Authorization"))
		case "/slow":
			<-r.Context().Done()
		case "/big":
			_, _ = w.Write([]byte(`"` + strings.Repeat("x", MaxBody) + `"`))
		}
	}))
	defer srv.Close()
	secrets := redact.New(token)
	headers := []Header{{Key: "Authorization", Value: "Bearer " + token}}
	pass, err := Compile("result.ok == true", "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		req       HTTPRequest
		conds     string
		want      Result
		wantValue string
	}{
		{name: "redacts an echoed secret", req: HTTPRequest{URL: srv.URL + "/echo", Headers: headers},
			want: Result{Phase: Successful}, wantValue: `"auth":"Bearer [secret]"`},
		{name: "posts a JSON body", req: HTTPRequest{URL: srv.URL + "/echo", Method: http.MethodPost, Body: `{"q":1}`},
			conds: `result.method == 'POST' && result.body == '{"q":1}' && result.type == 'application/json'`,
			want:  Result{Phase: Successful}, wantValue: `"method":"POST"`},
		{name: "a selected value that fails", req: HTTPRequest{URL: srv.URL + "/echo", JSONPath: "{$.method}"},
			conds: "result == 'POST'", want: Result{Phase: Failed, Message: "successCondition is false"}, wantValue: "GET"},
		{name: "a status outside 2xx is an error", req: HTTPRequest{URL: srv.URL + "/down", Headers: headers},
			want: Result{Phase: Error, Message: "received status 503 Service Unavailable"}},
		{name: "a timeout is an error", req: HTTPRequest{URL: srv.URL + "/slow", Timeout: 50 * time.Millisecond},
			want: Result{Phase: Error, Message: "deadline exceeded"}},
		{name: "a long answer is an error", req: HTTPRequest{URL: srv.URL + "/big"},
			want: Result{Phase: Error, Message: "longer than"}},
		{name: "no server is an error", req: HTTPRequest{URL: "http://127.0.0.1:1/"},
			want: Result{Phase: Error, Message: "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Secrets = secrets
			conds := pass
			if tt.conds != "" {
				var err error
				if conds, err = Compile(tt.conds, ""); err != nil {
					t.Fatal(err)
				}
			}
			got := MeasureHTTP(context.Background(), srv.Client(), tt.req, conds)
			if got.Phase != tt.want.Phase || !strings.Contains(got.Message, tt.want.Message) || !strings.Contains(got.Value, tt.wantValue) {
				t.Errorf("MeasureHTTP = %+v, want %+v with value containing %q", got, tt.want, tt.wantValue)
			}
			if strings.Contains(got.Value+got.Message, token) {
				t.Errorf("the secret leaked: %+v", got)
			}
			if len(got.Value) > MaxValue {
				t.Errorf("value of %d bytes, above %d", len(got.Value), MaxValue)
			}
		})
	}
}

// FuzzConditions compiles and evaluates any condition over any answer:
// nothing may panic, a compiled condition yields one of the three phases,
// and the cost limit keeps each evaluation bounded.
func FuzzConditions(f *testing.F) {
	for _, seed := range []struct{ cond, answer string }{
		{"result.ok == true", `{"ok":true}`},
		{"size(result) > 0", `[1,2,3]`},
		{"has(result.ok) && result.ok", `{}`},
		{"result.updates[0].result == 'succeeded'", `{"updates":[{"result":"succeeded"}]}`},
		{"result.rate < 0.5", `{"rate":1e308}`},
		{"result == 'ok'", `ok`},
		{"result.all(x, x > 0)", `[1,-1]`},
		{"int(result) / 0 == 1", `7`},
	} {
		f.Add(seed.cond, seed.answer)
	}
	f.Fuzz(func(t *testing.T, cond, answer string) {
		value, err := Select([]byte(answer), "")
		if err != nil {
			t.Fatalf("Select without a path never fails, got %v", err)
		}
		conds, err := Compile(cond, cond)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		switch phase, _ := conds.Evaluate(ctx, value); phase {
		case Successful, Failed, Error:
		default:
			t.Fatalf("Evaluate(%q) = %q", cond, phase)
		}
	})
}
