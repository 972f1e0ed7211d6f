package hooks

import "strings"

// Identity is the verified identity of a call's caller, as an authenticator
// established it (a ServiceAccount token reviewed by the API server, an OIDC
// token, a static development token, or the anonymous caller). It is shared
// between the calls of one caller and must not be modified.
type Identity struct {
	// Username is the caller's name, e.g. "system:serviceaccount:ns:name".
	// It is the call's SenderID.
	Username string
	// UID is the caller's unique id, when the authenticator knows one.
	UID string
	// Groups are the caller's groups.
	Groups []string
	// Extra are further attributes (claims, ServiceAccount pod bindings).
	Extra map[string][]string
	// Kind is how the identity was verified; empty when the authenticator
	// did not say (see KindOf).
	Kind IdentityKind
}

// IdentityKind is how a caller was verified: one of a small fixed set, so it
// may label metrics where the username may not.
type IdentityKind string

// Identity kinds.
const (
	// IdentityServiceAccount: a Kubernetes ServiceAccount token, reviewed by the API server.
	IdentityServiceAccount IdentityKind = "serviceaccount"
	// IdentityUser: another Kubernetes user whose token the API server reviewed.
	IdentityUser IdentityKind = "user"
	// IdentityOIDC: a JWT of a configured OpenID Connect issuer.
	IdentityOIDC IdentityKind = "oidc"
	// IdentityStatic: a static token from the gateway's tokens file.
	IdentityStatic IdentityKind = "static"
	// IdentityAnonymous: a caller without a token, where that is allowed.
	IdentityAnonymous IdentityKind = "anonymous"
	// IdentityNone: the call has no caller (it did not come through an
	// authenticated API).
	IdentityNone IdentityKind = "none"
	// IdentityUnknown: an identity whose authenticator did not set Kind.
	IdentityUnknown IdentityKind = "unknown"
)

// KindOf returns the kind of id, always one of the constants above: a kind
// outside them is IdentityUnknown, a nil identity IdentityNone.
func KindOf(id *Identity) IdentityKind {
	if id == nil {
		return IdentityNone
	}
	switch id.Kind {
	case IdentityServiceAccount, IdentityUser, IdentityOIDC, IdentityStatic, IdentityAnonymous:
		return id.Kind
	}
	return IdentityUnknown
}

// serviceAccountPrefix starts the username of a Kubernetes ServiceAccount.
const serviceAccountPrefix = "system:serviceaccount:"

// ServiceAccount returns the namespace and name of a ServiceAccount identity.
func (id *Identity) ServiceAccount() (namespace, name string, ok bool) {
	if id == nil {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(id.Username, serviceAccountPrefix)
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	if !ok || namespace == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return namespace, name, true
}
