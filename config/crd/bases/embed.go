// Package bases embeds the CustomResourceDefinitions that controller-gen
// writes here (make manifests), so that code applying the CRDs' schemas
// outside a cluster reads the generated files themselves.
package bases

import "embed"

// FS holds the CRD manifests (*.yaml).
//
//go:embed *.yaml
var FS embed.FS
