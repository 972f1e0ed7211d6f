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
