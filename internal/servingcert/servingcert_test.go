package servingcert

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

func TestServes(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	hosts := []string{"stackyard-webhook.stackyard-system.svc", "127.0.0.1"}
	data, err := newPair(now, hosts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ca, caKey, why := parseCA(data)
	if why != "" {
		t.Fatal(why)
	}
	other, err := newPair(now, hosts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, _, _ := parseCA(other)
	renewed, err := newPair(now, append(hosts, "new.example"), ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	mixed := map[string][]byte{CertFile: data[CertFile], KeyFile: other[KeyFile]}
	for _, tt := range []struct {
		name  string
		data  map[string][]byte
		ca    *x509.Certificate
		now   time.Time
		hosts []string
		want  string // a part of why; "" when it serves
	}{
		{"made for the hosts", data, ca, now, hosts, ""},
		{"another name", data, ca, now, []string{"stackyard-webhook.other.svc"}, "does not cover stackyard-webhook.other.svc"},
		{"close to its end", data, ca, now.Add(CertValidity - Renew + time.Hour), hosts, "holds a certificate that ends at"},
		{"signed by another CA", data, otherCA, now, hosts, "its CA did not sign"},
		{"a key of another certificate", mixed, ca, now, hosts, "do not match"},
		{"renewed by the same CA", renewed, ca, now, append(hosts, "new.example"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := serves(tt.data, tt.ca, tt.now, tt.hosts)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("serves = %q, want %q", got, tt.want)
			}
		})
	}
	if _, _, why := parseCA(map[string][]byte{}); why == "" {
		t.Error("parseCA read a CA from nothing")
	}
}
