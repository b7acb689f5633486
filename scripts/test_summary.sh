#!/usr/bin/env bash
# Print colcon's test results as the one line CI reads ("N passed, N failed, N skipped")
# and exit non-zero when any test failed or errored, or when no test ran at all.
set -uo pipefail
build_base=${1:-build}
out=$(colcon test-result --test-result-base "$build_base" --all 2>&1)
colcon test-result --test-result-base "$build_base" --verbose >/dev/null 2>&1 || true
colcon test-result --test-result-base "$build_base" --verbose 2>&1 | grep -v '^Summary' \
  | sed -n '1,200p' | grep -E '^\S.*: [0-9]+ tests|<<<|failure|error' | head -60 || true
summary=$(echo "$out" | grep '^Summary:' | tail -1)
echo "$summary"
total=$(echo "$summary" | sed -n 's/^Summary: \([0-9]*\) tests.*/\1/p')
errors=$(echo "$summary" | sed -n 's/.* \([0-9]*\) errors.*/\1/p')
failures=$(echo "$summary" | sed -n 's/.* \([0-9]*\) failures.*/\1/p')
skipped=$(echo "$summary" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
total=${total:-0}; errors=${errors:-0}; failures=${failures:-0}; skipped=${skipped:-0}
failed=$((errors + failures))
passed=$((total - failed - skipped))
echo "$passed passed, $failed failed, $skipped skipped"
[ "$total" -gt 0 ] && [ "$failed" -eq 0 ]
