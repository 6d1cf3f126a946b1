#!/bin/sh
# `make demo`: validate the bundled and example policies, then run every example input document
# (the source documents' observations and their healthy counterparts) through the default policy.
set -u
mkdir -p .demo
audit=.demo/decisions.jsonl
: > "$audit"

echo "== Policies"
prunewarden validate policies/*.yaml examples/policies/*.yaml || exit $?

echo
echo "== Example inputs under policies/default.yaml (decision records: $audit)"
for input in examples/inputs/*.json; do
    echo
    echo "-- $input"
    prunewarden evaluate --format text --audit-log "$audit" "$input"
    status=$?
    [ "$status" -le 1 ] || exit "$status"
done

echo
echo "== The same seed narrowing under examples/policies/trial-audit.yaml (audit mode: exit 0)"
prunewarden evaluate --format text --policy examples/policies/trial-audit.yaml \
    --audit-log "$audit" examples/inputs/collapse-seed-narrowing.json || exit $?
echo
echo "$(wc -l < "$audit") decision records written to $audit"
