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
    if ! go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" "$pkg"; then
      failed+=("$pkg $fn")
    fi
  done
done < <(go list "${pkgs[@]}")

echo "fuzzed $targets targets for $FUZZTIME each; ${#failed[@]} failed"
if [ ${#failed[@]} -gt 0 ]; then printf '  %s\n' "${failed[@]}"; exit 1; fi
