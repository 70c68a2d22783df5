package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
)

// tokenBytes is how much randomness GenerateToken draws: 256 bits, beyond
// any guessing, online or offline.
const tokenBytes = 32

// GenerateToken returns a fresh random token for one workspace of the local
// runtime: 32 bytes from crypto/rand, encoded as unpadded URL-safe base64
// (43 characters), so it can travel in a header, an environment variable or a
// command-line flag without quoting.
func GenerateToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// NewStaticToken returns an Authorizer that accepts exactly one token. It is
// the local runtime's policy: the operator starts the agent as a subprocess,
// hands it a token from GenerateToken, and is the only party that knows it.
//
// Tokens are compared in constant time (over their SHA-256 digests, so not
// even the length leaks). An empty token is never accepted, and an
// Authorizer built from an empty token refuses everything, so a missing
// setting fails closed.
func NewStaticToken(token string) Authorizer {
	s := &staticToken{}
	if token != "" {
		s.digest = sha256.Sum256([]byte(token))
		s.set = true
	}
	return s
}

// staticToken keeps only the digest of the expected token, so a dump of the
// process's structures shows no usable secret.
type staticToken struct {
	digest [sha256.Size]byte
	set    bool
}

// Authorize accepts token if it equals the configured one.
func (s *staticToken) Authorize(_ context.Context, token string) error {
	if !s.set || token == "" {
		return errUnauthenticated("invalid bearer token")
	}
	got := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(got[:], s.digest[:]) != 1 {
		return errUnauthenticated("invalid bearer token")
	}
	return nil
}

// String keeps the digest out of anything that prints the Authorizer.
func (*staticToken) String() string { return "StaticToken([redacted])" }
