package verify

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
)

// metadataAddresses are the cloud metadata services that answer outside
// the link-local ranges (Alibaba Cloud's, AWS's IPv6 one).
var metadataAddresses = []netip.Addr{
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("fd00:ec2::254"),
}

// ErrRestrictedAddress is the error of a check that would reach a
// link-local or cloud metadata address without its stage's leave.
var ErrRestrictedAddress = errors.New("link-local and cloud metadata addresses are refused unless the check sets allowLinkLocal")

// restricted reports whether addr is link-local (where cloud metadata
// services answer: 169.254.169.254, fe80::/10) or a known metadata address.
func restricted(addr netip.Addr) bool {
	addr = addr.Unmap()
	if addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() {
		return true
	}
	for _, m := range metadataAddresses {
		if addr == m {
			return true
		}
	}
	return false
}

// NewHTTPClient returns the client verification checks call endpoints
// with, on behalf of a stage, with the operator's network position:
//
//   - it never follows a redirect to another host (scheme, host or port),
//     so an endpoint cannot send the check, and the headers it carries,
//     elsewhere;
//   - unless allowLinkLocal, it refuses to connect to a link-local or
//     cloud metadata address, whatever name resolved to it: the address is
//     checked when the connection is made, after DNS, so a name that
//     resolves there later is refused too.
func NewHTTPClient(allowLinkLocal bool) *http.Client {
	dialer := &net.Dialer{}
	if !allowLinkLocal {
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("connecting to %s: %w", address, err)
			}
			if restricted(ap.Addr()) {
				return fmt.Errorf("connecting to %s: %w", ap.Addr(), ErrRestrictedAddress)
			}
			return nil
		}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = dialer.DialContext
	transport.Proxy = nil // a proxy would connect for us, past the check
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			first := via[0].URL
			if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
				return fmt.Errorf("refusing to follow a redirect from %s://%s to %s://%s: a check stays on the host it names",
					first.Scheme, first.Host, req.URL.Scheme, req.URL.Host)
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
}
