package tenancy

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCheck(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	for _, tc := range []struct {
		name       string
		err        error
		notEnabled bool
	}{
		{"forbidden", apierrors.NewForbidden(secrets, "creds", errors.New("no RBAC")), true},
		{"not found", apierrors.NewNotFound(secrets, "creds"), false},
		{"other", errors.New("connection refused"), false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := Check(tc.err, "team-a")
			g.Expect(errors.Is(err, ErrNamespaceNotEnabled)).To(Equal(tc.notEnabled))
			if tc.notEnabled {
				g.Expect(err.Error()).To(And(ContainSubstring("namespace team-a"), ContainSubstring("hyperfleet-tenant-manager"),
					ContainSubstring("docs/install.md")))
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the API error stays reachable")
			} else if tc.err == nil {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(BeIdenticalTo(tc.err))
			}
		})
	}
}
