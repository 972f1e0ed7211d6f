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

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GatewayLabel marks a pod as a toolhooks gateway; policies select among such
// pods with their gatewaySelector.
const GatewayLabel = "toolhooks.dev/gateway"

// GetPolicyStatus returns the policy's status for the controller to update.
func (p *AutonomyPolicy) GetPolicyStatus() *PolicyStatus { return &p.Status }

// GetGatewaySelector returns the policy's gateway selector (nil selects all).
func (p *AutonomyPolicy) GetGatewaySelector() *metav1.LabelSelector { return p.Spec.GatewaySelector }

// GetPolicyStatus returns the policy's status for the controller to update.
func (p *ContractPolicy) GetPolicyStatus() *PolicyStatus { return &p.Status }

// GetGatewaySelector returns the policy's gateway selector (nil selects all).
func (p *ContractPolicy) GetGatewaySelector() *metav1.LabelSelector { return p.Spec.GatewaySelector }

// GetPolicyStatus returns the policy's status for the controller to update.
func (p *PluginHook) GetPolicyStatus() *PolicyStatus { return &p.Status }

// GetGatewaySelector returns the policy's gateway selector (nil selects all).
func (p *PluginHook) GetGatewaySelector() *metav1.LabelSelector { return p.Spec.GatewaySelector }

// GetPolicyStatus returns the policy's status for the controller to update.
func (p *ResultPolicy) GetPolicyStatus() *PolicyStatus { return &p.Status }

// GetGatewaySelector returns the policy's gateway selector (nil selects all).
func (p *ResultPolicy) GetGatewaySelector() *metav1.LabelSelector { return p.Spec.GatewaySelector }
