// Package servingcert makes and keeps the serving certificate of the
// operator's admission webhook, with no cert-manager: a CA and a
// certificate it signed, kept in one Secret of the operator's namespace,
// so that every replica serves the same certificate and the API server
// trusts them all through one CA. The first replica to start makes the
// Secret (one that finds it made meanwhile reads it), writes the pair
// where the webhook server reads it, and sets the CA as the caBundle of
// the webhook's configuration. A certificate that no longer covers the
// Service's names, or expires within Renew, is made anew. Removing the
// Secret and restarting the operator rotates the CA.
package servingcert

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The keys of the Secret.
const (
	// CAKey holds the CA's certificate, PEM: the configuration's caBundle.
	CAKey = "ca.crt"
	// CAPrivateKey holds the CA's key, PEM, to sign a new certificate.
	CAPrivateKey = "ca.key"
)

// The files the webhook server reads from its certificate directory.
const (
	CertFile = corev1.TLSCertKey       // "tls.crt"
	KeyFile  = corev1.TLSPrivateKeyKey // "tls.key"
)

// Lifetimes of what is made.
const (
	// CAValidity is how long the CA is valid.
	CAValidity = 10 * 365 * 24 * time.Hour
	// CertValidity is how long a serving certificate is valid.
	CertValidity = 2 * 365 * 24 * time.Hour
	// Renew is how long before its end a certificate is made anew, on
	// the next start of the operator.
	Renew = 90 * 24 * time.Hour
)

// Options say where the pair is kept and for whom it is made.
type Options struct {
	// Secret is where the CA and the certificate are kept (the operator's
	// own namespace).
	Secret types.NamespacedName
	// Hosts are the DNS names and IP addresses the certificate covers:
	// the webhook Service's DNS names ("<service>.<namespace>.svc").
	Hosts []string
	// Dir is where tls.crt and tls.key are written for the webhook
	// server.
	Dir string
	// Configuration names the MutatingWebhookConfiguration whose webhooks'
	// caBundle is set to the CA; empty sets none.
	Configuration string
	// ValidatingConfiguration names the ValidatingWebhookConfiguration
	// whose webhooks' caBundle is set to the CA; empty sets none.
	ValidatingConfiguration string
}

// Ensure makes or reads the pair, writes it into o.Dir and sets the
// configuration's caBundle, with c (a client that reads without a
// cache). It returns the CA, PEM.
func Ensure(ctx context.Context, c client.Client, now time.Time, o Options) ([]byte, error) {
	if len(o.Hosts) == 0 {
		return nil, errors.New("the webhook's serving certificate covers no host name")
	}
	sec, err := ensureSecret(ctx, c, now, o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	for _, k := range []string{CertFile, KeyFile} {
		if err := os.WriteFile(filepath.Join(o.Dir, k), sec.Data[k], 0o600); err != nil {
			return nil, fmt.Errorf("writing the webhook's %s: %w", k, err)
		}
	}
	ca := sec.Data[CAKey]
	for kind, name := range map[string]string{
		"MutatingWebhookConfiguration": o.Configuration, "ValidatingWebhookConfiguration": o.ValidatingConfiguration,
	} {
		if name == "" {
			continue
		}
		if err := injectCA(ctx, c, kind, name, ca); err != nil {
			return nil, err
		}
	}
	return ca, nil
}

// ensureSecret returns the Secret holding a pair that serves o.Hosts
// beyond now+Renew, making it, or the certificate in it, when needed.
func ensureSecret(ctx context.Context, c client.Client, now time.Time, o Options) (*corev1.Secret, error) {
	for attempt := 0; ; attempt++ {
		sec := &corev1.Secret{}
		err := c.Get(ctx, o.Secret, sec)
		switch {
		case apierrors.IsNotFound(err):
			data, err := newPair(now, o.Hosts, nil, nil)
			if err != nil {
				return nil, err
			}
			sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.Secret.Namespace, Name: o.Secret.Name},
				Type: corev1.SecretTypeTLS, Data: data}
			err = c.Create(ctx, sec)
			if err == nil {
				return sec, nil
			}
			if !apierrors.IsAlreadyExists(err) || attempt > 2 {
				return nil, fmt.Errorf("creating Secret %s for the webhook's certificate: %w", o.Secret, err)
			}
			continue // another replica made it first
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s, the webhook's certificate: %w", o.Secret, err)
		}
		caCert, caKey, why := parseCA(sec.Data)
		if why == "" {
			why = serves(sec.Data, caCert, now, o.Hosts)
		}
		if why == "" {
			return sec, nil
		}
		if caCert == nil || caCert.NotAfter.Before(now.Add(Renew)) {
			caCert, caKey = nil, nil // a new CA too
		}
		data, err := newPair(now, o.Hosts, caCert, caKey)
		if err != nil {
			return nil, err
		}
		sec.Data = data
		err = c.Update(ctx, sec)
		if err == nil {
			return sec, nil
		}
		if !apierrors.IsConflict(err) || attempt > 2 {
			return nil, fmt.Errorf("Secret %s %s; writing a new certificate: %w", o.Secret, why, err)
		}
	}
}

// parseCA reads the CA of the Secret's data; why says what is wrong,
// "" when nothing.
func parseCA(data map[string][]byte) (*x509.Certificate, *ecdsa.PrivateKey, string) {
	cert, err := parseCert(data[CAKey])
	if err != nil {
		return nil, nil, fmt.Sprintf("holds no CA certificate in %s (%v)", CAKey, err)
	}
	block, _ := pem.Decode(data[CAPrivateKey])
	if block == nil {
		return nil, nil, fmt.Sprintf("holds no CA key in %s", CAPrivateKey)
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Sprintf("holds no CA key in %s (%v)", CAPrivateKey, err)
	}
	return cert, key, ""
}

// serves says why the Secret's certificate does not serve hosts until
// now+Renew as signed by ca, "" when it does.
func serves(data map[string][]byte, ca *x509.Certificate, now time.Time, hosts []string) string {
	cert, err := parseCert(data[CertFile])
	if err != nil {
		return fmt.Sprintf("holds no certificate in %s (%v)", CertFile, err)
	}
	if _, err := tlsPair(data); err != nil {
		return fmt.Sprintf("holds a certificate and key that do not match (%v)", err)
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		return "holds a certificate its CA did not sign"
	}
	if cert.NotAfter.Before(now.Add(Renew)) {
		return fmt.Sprintf("holds a certificate that ends at %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	for _, h := range hosts {
		if err := cert.VerifyHostname(h); err != nil {
			return fmt.Sprintf("holds a certificate that does not cover %s", h)
		}
	}
	return ""
}

// newPair makes a serving certificate for hosts, signed by ca (a new CA
// when nil), and returns the Secret's data.
func newPair(now time.Time, hosts []string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (map[string][]byte, error) {
	if ca == nil {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: "stackyard webhook CA"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(CAValidity),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, err
		}
		if ca, err = x509.ParseCertificate(der); err != nil {
			return nil, err
		}
		caKey = key
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(CertValidity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		CAKey:        pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		CAPrivateKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: caKeyDER}),
		CertFile:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyFile:      pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// injectCA sets ca as the caBundle of every webhook of the webhook
// configuration kind/name (of admissionregistration.k8s.io/v1, where
// mutating and validating webhooks hold clientConfig alike) that does not
// hold it already.
func injectCA(ctx context.Context, c client.Client, kind, name string, ca []byte) error {
	want := base64.StdEncoding.EncodeToString(ca)
	for attempt := 0; ; attempt++ {
		cfg := &unstructured.Unstructured{}
		cfg.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind(kind))
		if err := c.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
			return fmt.Errorf("reading %s %s to set its caBundle: %w", kind, name, err)
		}
		hooks, _, err := unstructured.NestedSlice(cfg.Object, "webhooks")
		if err != nil {
			return fmt.Errorf("%s %s: webhooks: %w", kind, name, err)
		}
		changed := false
		for _, h := range hooks {
			hook, ok := h.(map[string]any)
			if !ok {
				continue
			}
			if got, _, _ := unstructured.NestedString(hook, "clientConfig", "caBundle"); got != want {
				if err := unstructured.SetNestedField(hook, want, "clientConfig", "caBundle"); err != nil {
					return fmt.Errorf("%s %s: clientConfig: %w", kind, name, err)
				}
				changed = true
			}
		}
		if !changed {
			return nil
		}
		if err := unstructured.SetNestedSlice(cfg.Object, hooks, "webhooks"); err != nil {
			return err
		}
		switch err := c.Update(ctx, cfg); {
		case err == nil:
			return nil
		case !apierrors.IsConflict(err) || attempt > 2:
			return fmt.Errorf("setting the caBundle of %s %s: %w", kind, name, err)
		}
	}
}

// parseCert reads one PEM certificate.
func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}

// serial is a random certificate serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// tlsPair checks that the certificate and key of data belong together.
func tlsPair(data map[string][]byte) (tls.Certificate, error) {
	return tls.X509KeyPair(data[CertFile], data[KeyFile])
}
