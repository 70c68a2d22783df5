package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/util/jsonpath"

	sreconcile "github.com/stackyard/stackyard/internal/reconcile"
	"github.com/stackyard/stackyard/internal/redact"
)

// DefaultTimeout bounds one HTTP measurement when the check sets no
// timeoutSeconds.
const DefaultTimeout = 10 * time.Second

// MaxBody is how much of an answer is read; a longer one is an Error.
const MaxBody = 1 << 20

// MaxValue is the length a measured value is cut to in status.
const MaxValue = 256

// Header is one request header, its value resolved (from a Secret or
// inline).
type Header struct {
	// Key is the header's name.
	Key string
	// Value is its value.
	Value string
}

// HTTPRequest is one HTTP measurement to take.
type HTTPRequest struct {
	// URL is the address to call.
	URL string
	// Method is GET when empty.
	Method string
	// Headers are sent as given.
	Headers []Header
	// Body is sent when not empty, as application/json unless a header
	// says otherwise.
	Body string
	// JSONPath selects the value from the answer; empty means all of it.
	JSONPath string
	// Timeout bounds the request; DefaultTimeout when zero.
	Timeout time.Duration
	// AllowLinkLocal lets the request reach link-local and cloud
	// metadata addresses (see NewHTTPClient).
	AllowLinkLocal bool
	// Secrets are removed from every value and message of the
	// measurement: the values of headers read from Secrets, which an
	// endpoint might echo.
	Secrets *redact.Set
}

// Result is one measurement's outcome.
type Result struct {
	// Phase is Successful, Failed or Error.
	Phase string
	// Value is the selected value as JSON, redacted, cut to MaxValue.
	Value string
	// Message says what went wrong, for Failed and Error.
	Message string
}

// MeasureHTTP takes one measurement: it calls the endpoint, selects the
// value and judges it with conds. Whatever it returns has gone through
// req.Secrets.
func MeasureHTTP(ctx context.Context, client *http.Client, req HTTPRequest, conds *Conditions) Result {
	value, err := fetch(ctx, client, req)
	if err != nil {
		return Result{Phase: Error, Message: req.Secrets.Redact(err.Error())}
	}
	phase, msg := conds.Evaluate(ctx, value)
	return Result{Phase: phase, Value: FormatValue(value, req.Secrets), Message: req.Secrets.Redact(msg)}
}

// fetch calls the endpoint and returns the selected value.
func fetch(ctx context.Context, client *http.Client, req HTTPRequest) (any, error) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, req.URL, body)
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	for _, h := range req.Headers {
		hr.Header.Add(h.Key, h.Value)
	}
	if req.Body != "" && hr.Header.Get("Content-Type") == "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(data) > MaxBody {
		return nil, fmt.Errorf("the answer is longer than %d bytes", MaxBody)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("received status %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return Select(data, req.JSONPath)
}

// Select decodes a JSON answer and returns what path selects of it: the
// one value it matches, or the list of them when it matches several.
// Numbers become int64 when whole and float64 otherwise. Without path the
// whole document is the value, and an answer that is not JSON is the
// string it holds. path takes the Kubernetes JSONPath syntax Argo Rollouts
// uses ("{$.data.ok}"); the braces may be left out.
func Select(data []byte, path string) (any, error) {
	doc, err := decode(data)
	if err != nil {
		if path == "" {
			return string(data), nil
		}
		return nil, fmt.Errorf("the answer is not JSON, which jsonPath %q needs: %w", path, err)
	}
	if path == "" {
		return doc, nil
	}
	if !strings.Contains(path, "{") {
		path = "{" + path + "}"
	}
	jp := jsonpath.New("jsonPath")
	if err := jp.Parse(path); err != nil {
		return nil, fmt.Errorf("jsonPath %q: %w", path, err)
	}
	found, err := jp.FindResults(doc)
	if err != nil {
		return nil, fmt.Errorf("jsonPath %q: %w", path, err)
	}
	var values []any
	for _, list := range found {
		for _, v := range list {
			if v.IsValid() && v.CanInterface() {
				values = append(values, v.Interface())
			} else {
				values = append(values, nil)
			}
		}
	}
	switch len(values) {
	case 0:
		return nil, fmt.Errorf("jsonPath %q selects nothing", path)
	case 1:
		return values[0], nil
	default:
		return values, nil
	}
}

// decode parses a JSON document into maps, lists, strings, bools, nil,
// int64 (whole numbers that fit) and float64.
func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON document")
	}
	return numbers(v), nil
}

// numbers replaces the json.Numbers inside v.
func numbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			t[k] = numbers(c)
		}
	case []any:
		for i, c := range t {
			t[i] = numbers(c)
		}
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		// Out of range, Float64 returns the infinity of the sign.
		f, _ := t.Float64()
		return f
	}
	return v
}

// FormatValue renders a measured value for status: JSON (a string as
// itself), with secrets removed, cut to MaxValue bytes.
func FormatValue(v any, secrets *redact.Set) string {
	var s string
	if str, ok := v.(string); ok {
		s = str
	} else if data, err := json.Marshal(v); err == nil {
		s = string(data)
	} else {
		s = fmt.Sprint(v)
	}
	return sreconcile.Truncate(secrets.Redact(s), MaxValue)
}
