#!/bin/sh
# `make demo`: validate the bundled and example policies, then run every example input document
# (the source documents' observations and their healthy counterparts) through the default policy,
# then walk a deployment's policies: overlays, a shadow candidate, and a refused overlay.
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
echo "== Deployments: a base policy and its overlays (docs/deployments.md)"
deploy=examples/deployments
prunewarden validate "$deploy/base.yaml" "$deploy/prod-eu.yaml" "$deploy/staging.yaml" \
    "$deploy/prod-eu-candidate.yaml" || exit $?
echo
echo "-- What prod-eu sets, and which file and line set it"
prunewarden policy show "$deploy/prod-eu.yaml" || exit $?
echo
echo "-- The candidate against prod-eu (exit 1: they differ)"
prunewarden policy diff "$deploy/prod-eu.yaml" "$deploy/prod-eu-candidate.yaml"
[ $? -eq 1 ] || exit 1
echo
echo "-- The candidate in shadow on prod-eu traffic: prod-eu decides, the record keeps both"
prunewarden evaluate --format text --policy "$deploy/prod-eu.yaml" \
    --shadow "$deploy/prod-eu-candidate.yaml" --audit-log "$audit" \
    examples/inputs/eviction-healthy.json || exit $?
echo
echo "-- replay.yaml loosens what the base guards: refused at load (exit 3), as documented"
prunewarden validate "$deploy/replay.yaml"
[ $? -eq 3 ] || exit 1

echo
echo "$(wc -l < "$audit") audit records written to $audit"

echo
echo "== The audit log: its hash chain, and what it recorded"
prunewarden audit verify "$audit" || exit $?
prunewarden audit report "$audit" || exit $?
