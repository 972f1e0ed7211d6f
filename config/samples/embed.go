// Package samples embeds the sample policies of config/samples, so that the
// demo's default policies are the shipped samples themselves, not a copy
// that could drift from them.
package samples

import "embed"

// FS holds the sample policy files (policy_*.yaml).
//
//go:embed policy_*.yaml
var FS embed.FS
