package vmpool

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/util/rand"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// TemplateHash is the short hash of a pool's claim template spec that names its claims and marks
// them (VMPoolTemplateHashLabel), like MachineDeployment's machine-template-hash: claims with
// another hash are outdated. Only the spec counts: the template's metadata is applied to existing
// claims in place and replaces no VM. At most 10 characters from [bcdfghjklmnpqrstvwxz2456789].
func TemplateHash(spec *infrav1.MachineClaimSpec) (string, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("hashing the template: %w", err)
	}
	h := fnv.New32a()
	_, _ = h.Write(data)
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32())), nil
}
