package custody_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

var env *testenv.Env

// The key's custody is about what the API server does (Create racing Create, an immutable Secret,
// the names a ConfigMap accepts), which a fake client only imitates, so the tests run against
// envtest.
func TestMain(m *testing.M) {
	testenv.ExitIfShort("an API server")
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// newNamespace gives each test its own namespace, so no test sees another's key.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "provenance-"}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}
