package integration

import (
	"fmt"
	"os"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.ExitIfShort("an API server")
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}
