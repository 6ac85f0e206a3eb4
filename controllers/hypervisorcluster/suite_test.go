package hypervisorcluster_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// The package's tests use controllertest's harness under the short names they were written with.
var env *testenv.Env

type testTiming = controllertest.Timing

func TestMain(m *testing.M) {
	controllertest.Main(m, "an API server and the manager", func(e *testenv.Env) { env = e })
}

var (
	startCAPI           = controllertest.StartCAPI
	startManager        = controllertest.StartManager
	newNamespace        = controllertest.NewNamespace
	proxmoxCluster      = controllertest.ProxmoxCluster
	keyOf               = controllertest.KeyOf
	vmidOf              = controllertest.VMIDOf
	poolMachines        = controllertest.PoolMachines
	setRunnerConfigTime = controllertest.SetRunnerConfigTime
	githubPool          = controllertest.GitHubPool
	registerJITRunner   = controllertest.RegisterJITRunner
)

func get[T client.Object](g Gomega, obj T) T { return controllertest.Get(g, obj) }
