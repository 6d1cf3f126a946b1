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
echo "== A constraint filed as an ordinary turn: allowed by default, pinned by a rule in"
echo "   examples/policies/content-pins.yaml (custom conditions in CEL, docs/rules.md)"
prunewarden evaluate --format text --audit-log "$audit" \
    examples/inputs/eviction-untagged-negation.json || exit $?
prunewarden evaluate --format text --policy examples/policies/content-pins.yaml \
    --audit-log "$audit" examples/inputs/eviction-untagged-negation.json
[ $? -le 1 ] || exit 1
echo
echo "$(wc -l < "$audit") audit records written to $audit"

echo
echo "== The audit log: its hash chain, and what it recorded"
prunewarden audit verify "$audit" || exit $?
prunewarden audit report "$audit" || exit $?
