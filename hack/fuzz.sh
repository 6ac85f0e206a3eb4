#!/usr/bin/env bash
# Runs every Go fuzz target of the module for a bounded time each (FUZZTIME, default 30s), one
# after another. Plain `go test` already runs each target's committed seed corpus
# (testdata/fuzz/<Target>/); this explores beyond it. A failure leaves the crashing input in the
# package's testdata/fuzz/<Target>/ directory: commit it with the fix, as a new seed.
#
#   hack/fuzz.sh [PACKAGE...]      # default: ./...
set -euo pipefail
FUZZTIME=${FUZZTIME:-30s}
pkgs=("$@"); [ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)

targets=0 failed=()
while read -r pkg; do
  for fn in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    targets=$((targets + 1))
    echo "== $pkg $fn ($FUZZTIME)"
    out=$(mktemp)
    if ! go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$out"; then
      # Go's fuzz coordinator sometimes reports "context deadline exceeded" when FUZZTIME ends while
      # it is still minimizing a new input. A real failure always writes its input to testdata.
      if grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written to' "$out"; then
        echo "   (ended while minimizing a new input: not a failure)"
      else
        failed+=("$pkg $fn")
      fi
    fi
    rm -f "$out"
  done
done < <(go list "${pkgs[@]}")

echo "fuzzed $targets targets for $FUZZTIME each; ${#failed[@]} failed"
if [ ${#failed[@]} -gt 0 ]; then printf '  %s\n' "${failed[@]}"; exit 1; fi
