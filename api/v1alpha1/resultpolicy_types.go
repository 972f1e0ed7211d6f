/*
Copyright 2026 The toolhooks Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ResultDetector names a built-in rule set (secrets, personalData) or one
// built-in rule. The enum is kept equal to the gateway's rule table by a test.
// +kubebuilder:validation:Enum=secrets;personalData;aws-access-key-id;aws-secret-access-key;github-token;gitlab-token;slack-token;slack-webhook;stripe-key;google-api-key;openai-api-key;anthropic-api-key;npm-token;azure-storage-key;private-key;jwt;connection-string-password;bearer-token;email-address;payment-card-number
type ResultDetector string

// ResultAction is what happens to a result a rule matches.
// +kubebuilder:validation:Enum=Redact;Withhold;Warn
type ResultAction string

const (
	// ResultRedact replaces each match with a marker naming the rule.
	ResultRedact ResultAction = "Redact"
	// ResultWithhold replaces the whole result.
	ResultWithhold ResultAction = "Withhold"
	// ResultWarn records the match and passes the result on unchanged.
	ResultWarn ResultAction = "Warn"
)

// ResultPattern is a custom rule: an RE2 regular expression.
type ResultPattern struct {
	// name names the rule in redaction markers and records; unique among the
	// policy's patterns and removeLines and the built-in rules' names.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`
	Name string `json:"name"`
	// regex is an RE2 regular expression; it must not match empty text.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Regex string `json:"regex"`
	// action overrides the policy's action for this rule.
	// +optional
	Action ResultAction `json:"action,omitempty"`
}

// ResultPath is a removal by JSONPath (RFC 9535).
type ResultPath struct {
	// name names the rule in markers and records; unique among the policy's
	// rules and the built-in rules' names.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`
	Name string `json:"name"`
	// path is a JSONPath query such as $.user.ssn or $..password; each value it
	// selects in a result that is a JSON document is replaced by a marker
	// naming the rule (with Redact), or handled as action says.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^\$`
	Path string `json:"path"`
	// action overrides the policy's action for this rule.
	// +optional
	Action ResultAction `json:"action,omitempty"`
}

// ResultPolicySpec says which tools' results are scanned, for what, and what
// happens to a match.
// +kubebuilder:validation:XValidation:rule="(has(self.detectors) && size(self.detectors) > 0) || (has(self.patterns) && size(self.patterns) > 0) || (has(self.removeLines) && size(self.removeLines) > 0) || (has(self.removePaths) && size(self.removePaths) > 0)",message="a result policy needs at least one of detectors, patterns, removeLines or removePaths"
type ResultPolicySpec struct {
	// subjects selects the calls (by session, channel, sender and verified caller)
	// whose results are scanned; empty scans every caller's.
	// +optional
	Subjects *Subjects `json:"subjects,omitempty"`
	// tools are globs of the tools whose results are scanned, matched without
	// regard to case.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Tools []string `json:"tools"`
	// detectors are built-in rule sets (secrets, personalData) or single rules.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	Detectors []ResultDetector `json:"detectors,omitempty"`
	// patterns are custom rules; a match is handled as action says.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Patterns []ResultPattern `json:"patterns,omitempty"`
	// removeLines are custom rules whose matching lines are replaced by a marker
	// naming the rule (with Redact), or handled as their action says.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	RemoveLines []ResultPattern `json:"removeLines,omitempty"`
	// removePaths are JSONPath rules applied first, to results that are JSON
	// documents. A result that is not a JSON document, or is nested deeper than
	// 128 levels, is withheld, since the values the paths select cannot be
	// shown absent (unless every path rule's action is Warn, which records it).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	RemovePaths []ResultPath `json:"removePaths,omitempty"`
	// action is what happens to a match of the detectors and of the rules that
	// name none: Redact (default) replaces the match with a marker naming the
	// rule, Withhold replaces the whole result, Warn only records it.
	// +optional
	// +kubebuilder:default=Redact
	Action ResultAction `json:"action,omitempty"`
	// maxBytes bounds the results scanned; a larger result is withheld
	// (default 64Mi).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=268435456
	MaxBytes int32 `json:"maxBytes,omitempty"`
	// timeout bounds each scan (default 5s, at most 30s). A scan that fails or
	// does not finish in time withholds the result.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('30s')",message="timeout must be more than 0s and at most 30s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// enforcementAction is Deny (default) or Warn (dry-run: record what the scan
	// found, pass the result on unchanged).
	// +optional
	// +kubebuilder:default=Deny
	EnforcementAction EnforcementAction `json:"enforcementAction,omitempty"`
	// gatewaySelector selects gateway pods in this namespace; empty selects all of them.
	// +optional
	GatewaySelector *metav1.LabelSelector `json:"gatewaySelector,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rp,categories=toolhooks
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="Enforcement",type=string,JSONPath=`.spec.enforcementAction`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.conditions[?(@.type=="Enforced")].status`
// +kubebuilder:printcolumn:name="Gateways",type=integer,JSONPath=`.status.gateways.selected`
// +kubebuilder:printcolumn:name="Enforcing",type=integer,JSONPath=`.status.gateways.enforcing`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ResultPolicy scans what the selected tools return before the caller sees
// it: secrets, personal data or custom patterns are redacted, the result
// withheld, or the finding only recorded.
type ResultPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`
	// spec is the desired behaviour.
	// +required
	Spec ResultPolicySpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// ResultPolicyList contains a list of ResultPolicy.
type ResultPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []ResultPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &ResultPolicy{}, &ResultPolicyList{})
		return nil
	})
}
