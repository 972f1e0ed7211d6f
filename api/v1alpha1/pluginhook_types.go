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

// PluginEvent is a hook event a plugin subscribes to.
// +kubebuilder:validation:Enum="tool:before";"tool:after";"tool:*"
type PluginEvent string

const (
	// EventToolBefore is sent before a tool runs; the plugin may deny the call.
	EventToolBefore PluginEvent = "tool:before"
	// EventToolAfter is sent after a tool ran; the reply is ignored.
	EventToolAfter PluginEvent = "tool:after"
	// EventToolAll subscribes to both events.
	EventToolAll PluginEvent = "tool:*"
)

// FailurePolicy says what a failing plugin (timeout, crash, bad reply) means for the call.
// +kubebuilder:validation:Enum=Ignore;Fail
type FailurePolicy string

const (
	// FailurePolicyIgnore allows the call when the plugin fails (fail-open); it must be chosen explicitly.
	FailurePolicyIgnore FailurePolicy = "Ignore"
	// FailurePolicyFail denies the call when the plugin fails (the default).
	FailurePolicyFail FailurePolicy = "Fail"
)

// ServiceReference names a Kubernetes Service serving a plugin over HTTP.
type ServiceReference struct {
	// name is the Service's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// namespace is the Service's namespace; empty means the PluginHook's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// port is the Service port.
	// +optional
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// path is the HTTP path requests are POSTed to.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="service.path must start with /"
	Path string `json:"path,omitempty"`
}

// HTTPTransport reaches a plugin over HTTP POST.
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.service)",message="exactly one of http.url and http.service must be set"
type HTTPTransport struct {
	// url is the plugin's http or https URL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https']",message="http.url must be an http or https URL"
	URL string `json:"url,omitempty"`
	// service names a Kubernetes Service serving the plugin.
	// +optional
	Service *ServiceReference `json:"service,omitempty"`
	// caBundle is a PEM bundle of CAs trusted for the plugin's TLS certificate.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CABundle string `json:"caBundle,omitempty"`
}

// EnvVar is one environment variable of a stdio plugin process.
type EnvVar struct {
	// name is the variable's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`
	// value is the variable's value.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
}

// StdioTransport runs a plugin as a process on the gateway, speaking
// newline-delimited JSON over its stdin and stdout.
type StdioTransport struct {
	// command is the program to run (for example "node").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Command string `json:"command"`
	// args are the program's arguments.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`
	// env are extra environment variables for the process.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Env []EnvVar `json:"env,omitempty"`
}

// PluginTransport is how the gateway reaches a plugin: exactly one of http and stdio.
// +kubebuilder:validation:XValidation:rule="has(self.http) != has(self.stdio)",message="exactly one of transport.http and transport.stdio must be set"
type PluginTransport struct {
	// http reaches the plugin over HTTP POST.
	// +optional
	HTTP *HTTPTransport `json:"http,omitempty"`
	// stdio runs the plugin as a process on the gateway.
	// +optional
	Stdio *StdioTransport `json:"stdio,omitempty"`
}

// PluginHookSpec is an external hook.
// +kubebuilder:validation:XValidation:rule="!has(self.timeout) || (duration(self.timeout) > duration('0s') && duration(self.timeout) <= duration('30s'))",message="timeout must be more than 0s and at most 30s",fieldPath=".timeout"
type PluginHookSpec struct {
	// events are the hook events the plugin receives.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	Events []PluginEvent `json:"events"`
	// transport is how the gateway reaches the plugin.
	// +required
	Transport PluginTransport `json:"transport"`
	// timeout bounds each before-phase call to the plugin (default 5s, at most 30s).
	// +optional
	// +kubebuilder:default="5s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// failurePolicy is Fail (deny the call when the plugin fails: times out, crashes or answers
	// badly; the default) or Ignore (allow it: fail-open, only when chosen explicitly).
	// +optional
	// +kubebuilder:default=Fail
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`
	// tools are globs of tool names the plugin is called for; empty means every tool.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	Tools []string `json:"tools,omitempty"`
	// enforcementAction is Deny (default) or Warn (dry-run: record, do not block).
	// +optional
	// +kubebuilder:default=Deny
	EnforcementAction EnforcementAction `json:"enforcementAction,omitempty"`
	// gatewaySelector selects gateway pods in this namespace; empty selects all of them.
	// +optional
	GatewaySelector *metav1.LabelSelector `json:"gatewaySelector,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ph,categories=toolhooks
// +kubebuilder:printcolumn:name="Failure",type=string,JSONPath=`.spec.failurePolicy`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.enforcementAction`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.conditions[?(@.type=="Enforced")].status`
// +kubebuilder:printcolumn:name="Gateways",type=integer,JSONPath=`.status.gateways.selected`
// +kubebuilder:printcolumn:name="Enforcing",type=integer,JSONPath=`.status.gateways.enforcing`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PluginHook is an external hook: a plugin process or HTTP service consulted
// before and/or after tool calls, with a timeout and a failure policy.
type PluginHook struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`
	// spec is the desired behaviour.
	// +required
	Spec PluginHookSpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// PluginHookList contains a list of PluginHook.
type PluginHookList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []PluginHook `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &PluginHook{}, &PluginHookList{})
		return nil
	})
}
