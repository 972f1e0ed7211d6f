package otlp

import "testing"

func TestEnabledFromTheEnvironment(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr bool
	}{
		{"nothing set", nil, false, false},
		{"exporter otlp", map[string]string{EnvTracesExporter: "otlp"}, true, false},
		{"endpoint", map[string]string{EnvEndpoint: "http://collector:4318"}, true, false},
		{"traces endpoint", map[string]string{EnvTracesEndpoint: "http://collector:4318/v1/traces"}, true, false},
		{"none wins over an endpoint", map[string]string{EnvTracesExporter: "none", EnvEndpoint: "http://c:4318"}, false, false},
		{"sdk disabled", map[string]string{EnvSDKDisabled: "true", EnvTracesExporter: "otlp"}, false, false},
		{"another exporter", map[string]string{EnvTracesExporter: "zipkin"}, false, true},
		{"grpc", map[string]string{EnvTracesExporter: "otlp", EnvProtocol: "grpc"}, false, true},
		{"http/protobuf", map[string]string{EnvEndpoint: "http://c:4318", EnvTracesProtocol: "http/protobuf"}, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			on, reason, err := enabled(func(k string) string { return tt.env[k] })
			if on != tt.on || (err != nil) != tt.wantErr {
				t.Errorf("enabled = %v, %q, %v; want %v (error %v)", on, reason, err, tt.on, tt.wantErr)
			}
			if !on && err == nil && reason == "" {
				t.Error("off without a reason")
			}
		})
	}
}

func TestEndpointAsTheExporterDerivesIt(t *testing.T) {
	for env, want := range map[[2]string]string{
		{"", ""}:               defaultHTTPTraceEP,
		{"http://c:4318", ""}:  "http://c:4318/v1/traces",
		{"http://c:4318/", ""}: "http://c:4318/v1/traces",
		{"http://c:4318", "https://t:4318/traces"}: "https://t:4318/traces",
	} {
		got := endpoint(func(k string) string {
			switch k {
			case EnvEndpoint:
				return env[0]
			case EnvTracesEndpoint:
				return env[1]
			}
			return ""
		})
		if got != want {
			t.Errorf("endpoint(%q) = %q, want %q", env, got, want)
		}
	}
}
