package integration

import (
	"fmt"
	"os"
	"testing"

	"github.com/toolhooks/toolhooks/internal/testenv"
)

// testEnv is the one API server and etcd every test in this package shares;
// tests keep apart by namespace and generated names.
var testEnv *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(runWithEnv(m))
}

func runWithEnv(m *testing.M) int {
	env, err := testenv.StartMain()
	if err != nil {
		fmt.Fprintf(os.Stderr, "Starting the test control plane: %v\n", err)
		return 1
	}
	testEnv = env
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "Stopping the test control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
