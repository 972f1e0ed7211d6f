// Package pki issues and reads the certificates that secure configuration
// pushes from the controller to the gateways: a self-signed ECDSA P-256 CA,
// serving certificates it signs, the rule deciding when either is renewed,
// and a key pair that a TLS server reloads from files when they change.
// It has no Kubernetes imports.
package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// pemCertificate is the PEM block type of a certificate.
const pemCertificate = "CERTIFICATE"

// Backdate is how far before its issuance a certificate becomes valid, so
// that a peer whose clock lags a little accepts it.
const Backdate = 5 * time.Minute

// KeyPair is a certificate with its private key, parsed and PEM-encoded.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA creates a self-signed CA valid from now (less Backdate) for lifetime.
func NewCA(commonName string, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return issue(tmpl, nil)
}

// IssueServing signs a TLS serving certificate for dnsNames, valid from now
// (less Backdate) for lifetime but never beyond the CA's own expiry, so that
// every certificate a CA signed has expired once the CA has.
func (ca *KeyPair) IssueServing(dnsNames []string, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	if len(dnsNames) == 0 {
		return nil, errors.New("a serving certificate needs at least one DNS name")
	}
	notAfter := now.Add(lifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    slices.Clone(dnsNames),
		NotBefore:   now.Add(-Backdate),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return issue(tmpl, ca)
}

// issue generates a P-256 key and signs tmpl with parent (self-signed when nil).
func issue(tmpl *x509.Certificate, parent *KeyPair) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)); err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.Key, parent.Cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("signing a certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the certificate just signed: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a key: %w", err)
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// ParseKeyPair reads a PEM certificate (the first of the chain) and its EC
// private key, and checks that they belong together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	certs, err := ParseCerts(certPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	var key *ecdsa.PrivateKey
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		var k any
		if k, err = x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
			var ok bool
			if key, ok = k.(*ecdsa.PrivateKey); !ok {
				err = fmt.Errorf("the private key is a %T, want ECDSA", k)
			}
		}
	default:
		err = fmt.Errorf("PEM block %q is not an EC private key", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parsing the private key: %w", err)
	}
	if !key.PublicKey.Equal(certs[0].PublicKey) {
		return nil, errors.New("the private key does not belong to the certificate")
	}
	return &KeyPair{Cert: certs[0], Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// ParseCerts reads every CERTIFICATE block of a PEM bundle; a bundle with
// none, or with another kind of block, is an error.
func ParseCerts(bundle []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := bytes.TrimSpace(bundle)
	for len(rest) > 0 {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("data that is not PEM after the certificates")
		}
		if block.Type != pemCertificate {
			return nil, fmt.Errorf("PEM block %q is not a certificate", block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing a certificate: %w", err)
		}
		out = append(out, cert)
		rest = bytes.TrimSpace(rest)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// EncodeCerts PEM-encodes certs in order.
func EncodeCerts(certs []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: pemCertificate, Bytes: c.Raw})
	}
	return b.Bytes()
}

// RenewAt is when cert is due for renewal: once less than a third of its
// lifetime remains.
func RenewAt(cert *x509.Certificate) time.Time {
	return cert.NotAfter.Add(-cert.NotAfter.Sub(cert.NotBefore) / 3)
}
