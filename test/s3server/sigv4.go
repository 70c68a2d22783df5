package s3server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sort"
	"strings"
	"time"
)

// sigV4Algorithm names the signing algorithm in the Authorization header.
const sigV4Algorithm = "AWS4-HMAC-SHA256"

// sign adds to req the headers of an AWS Signature Version 4 for the S3
// service in region, computed with creds at time now over the request's
// method, path, query, host and payload (body, which must be what req
// sends). The path and query are rewritten in the canonical encoding that
// was signed, so the server sees them byte for byte as signed.
func sign(req *http.Request, creds Credentials, region string, body []byte, now time.Time) {
	now = now.UTC()
	stamp := now.Format("20060102T150405Z")
	day := now.Format("20060102")
	payload := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(payload[:])

	path := uriEncode(req.URL.Path, false)
	if path == "" {
		path = "/"
	}
	req.URL.RawPath = path
	query := canonicalQuery(req)
	req.URL.RawQuery = query

	req.Header.Set("X-Amz-Date", stamp)
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	// The names of the signed headers, sorted, and their values.
	headers := []string{"host", "x-amz-content-sha256", "x-amz-date"}
	values := map[string]string{"host": req.URL.Host, "x-amz-content-sha256": payloadHash, "x-amz-date": stamp}
	var canonicalHeaders strings.Builder
	for _, h := range headers {
		canonicalHeaders.WriteString(h + ":" + values[h] + "\n")
	}
	signedHeaders := strings.Join(headers, ";")

	canonicalRequest := strings.Join([]string{
		req.Method, path, query, canonicalHeaders.String(), signedHeaders, payloadHash,
	}, "\n")
	scope := day + "/" + region + "/s3/aws4_request"
	requestHash := sha256.Sum256([]byte(canonicalRequest))
	stringToSign := strings.Join([]string{sigV4Algorithm, stamp, scope, hex.EncodeToString(requestHash[:])}, "\n")

	key := hmacSHA256([]byte("AWS4"+creds.SecretAccessKey), day)
	for _, part := range []string{region, "s3", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	signature := hex.EncodeToString(hmacSHA256(key, stringToSign))
	req.Header.Set("Authorization", sigV4Algorithm+" Credential="+creds.AccessKeyID+"/"+scope+
		", SignedHeaders="+signedHeaders+", Signature="+signature)
}

// hmacSHA256 returns the HMAC-SHA256 of data under key.
func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalQuery returns req's query parameters sorted by name, then
// value, each name and value URI-encoded, joined by '&'.
func canonicalQuery(req *http.Request) string {
	type pair struct{ name, value string }
	var pairs []pair
	for name, vals := range req.URL.Query() {
		for _, v := range vals {
			pairs = append(pairs, pair{uriEncode(name, true), uriEncode(v, true)})
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].name != pairs[j].name {
			return pairs[i].name < pairs[j].name
		}
		return pairs[i].value < pairs[j].value
	})
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = p.name + "=" + p.value
	}
	return strings.Join(parts, "&")
}

// uriEncode percent-encodes every byte of s but the unreserved characters
// of RFC 3986 (letters, digits, '-', '.', '_', '~'), as SigV4 requires;
// '/' is left alone unless encodeSlash is set (it is kept in paths and
// encoded in query values).
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}
