package bootstrapconfig

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

// TestSecretChecksSpaceOutReads: a data Secret seen in place is not read again for
// dataSecretRecheck; after that, once forgotten, for another config, or once the config records
// another token, it is.
func TestSecretChecksSpaceOutReads(t *testing.T) {
	g := NewWithT(t)
	var s secretChecks
	now := time.Unix(1_700_000_000, 0)
	g.Expect(s.recent("a", "h1", now)).To(BeFalse(), "never seen: read it")
	s.saw("a", "h1", now)
	g.Expect(s.recent("a", "h1", now.Add(dataSecretRecheck-time.Second))).To(BeTrue())
	g.Expect(s.recent("a", "h2", now)).To(BeFalse(), "a new token recorded: is the Secret written?")
	g.Expect(s.recent("b", "h1", now)).To(BeFalse())
	g.Expect(s.recent("a", "h1", now.Add(dataSecretRecheck))).To(BeFalse(), "due again")
	g.Expect(s.recent("a", "h1", now.Add(-time.Second))).To(BeFalse(), "a clock set back reads at once")
	s.forget("a")
	g.Expect(s.recent("a", "h1", now)).To(BeFalse())

	// Configs deleted long ago do not linger.
	for i := range 1024 {
		s.saw(types.UID(fmt.Sprint(i)), "h", now)
	}
	s.saw("late", "h", now.Add(2*dataSecretRecheck))
	g.Expect(len(s.at)).To(Equal(1))
}
