package authn_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stackyard/stackyard/internal/authn"
)

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		headers []string
		want    string
	}{
		{headers: []string{"Bearer abc"}, want: "abc"},
		{headers: []string{"bearer abc"}, want: "abc"},
		{headers: []string{"token abc"}, want: "abc"},
		{headers: []string{"Token  abc"}, want: "abc"},
		{headers: nil},
		{headers: []string{"Basic abc"}},
		{headers: []string{"Bearer"}},
		{headers: []string{"Bearer "}},
		{headers: []string{"Bearer a b"}},
		{headers: []string{"Bearer abc", "Bearer abc"}},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		for _, h := range tc.headers {
			r.Header.Add("Authorization", h)
		}
		got, err := authn.BearerToken(r)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("%q: %q, %v; want %q", tc.headers, got, err, tc.want)
		}
	}
}
