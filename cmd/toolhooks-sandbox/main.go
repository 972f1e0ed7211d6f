// Command toolhooks-sandbox is the supervisor of the programs the gateway's
// tools start (see package sandbox): a small executable that starts faster
// than the gateway's own, found by the gateway beside its executable. It
// does nothing when run otherwise.
package main

import (
	"fmt"
	"os"

	_ "github.com/toolhooks/toolhooks/internal/sandbox" // its init runs the supervisor
)

func main() {
	fmt.Fprintln(os.Stderr, "toolhooks-sandbox: started by the gateway only")
	os.Exit(2)
}
