package s3server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSignReferenceExamples checks sign against the worked examples of
// AWS's "Signature Calculations for the Authorization Header: Transferring
// Payload in a Single Chunk" (S3 API reference): their credentials, time
// and requests, and the signatures the page gives for them.
func TestSignReferenceExamples(t *testing.T) {
	creds := Credentials{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
	at := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name, url, query, signature string
	}{
		{
			name: "list objects, query out of order", url: "https://examplebucket.s3.amazonaws.com/?prefix=J&max-keys=2",
			query: "max-keys=2&prefix=J", signature: "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
		},
		{
			name: "subresource without a value", url: "https://examplebucket.s3.amazonaws.com/?lifecycle",
			query: "lifecycle=", signature: "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			sign(req, creds, "us-east-1", nil, at)
			want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
				"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + tt.signature
			if got := req.Header.Get("Authorization"); got != want {
				t.Errorf("Authorization = %q\nwant            %q", got, want)
			}
			if req.URL.RawQuery != tt.query {
				t.Errorf("query sent = %q, want the signed %q", req.URL.RawQuery, tt.query)
			}
			if got := req.Header.Get("X-Amz-Date"); got != "20130524T000000Z" {
				t.Errorf("X-Amz-Date = %q", got)
			}
		})
	}
}

func TestURIEncode(t *testing.T) {
	for in, want := range map[string]string{
		"/.pulumi/stacks/app/dev.json": "/.pulumi/stacks/app/dev.json",
		"/a b/c+d~e":                   "/a%20b/c%2Bd~e",
		"é":                            "%C3%A9",
	} {
		if got := uriEncode(in, false); got != want {
			t.Errorf("uriEncode(%q) = %q, want %q", in, got, want)
		}
	}
	if got := uriEncode("a/b", true); !strings.Contains(got, "%2F") {
		t.Errorf("uriEncode(a/b, encodeSlash) = %q", got)
	}
}
