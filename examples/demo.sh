#!/bin/sh
# `make demo`: replay the recorded sessions in examples/traces/ (the source documents'
# observations and healthy sessions) under the default policy, show what a looser candidate policy
# would change, walk a deployment's policies (overlays, a shadow candidate, a refused overlay), and
# review the audit log (the replayed traces and the log are drawn into .demo/plots/); then start
# prunewarden serve and drive one session through the Python client (and through the TypeScript
# package @prunewarden/client where node is on PATH and make has installed the Node example).
set -u
# The demo's output is one story, read in order whether it goes to a terminal, a pipe or a file:
# Python writes each line as it comes, and the errors the demo expects (located refusals) and
# the lines about files written go to standard output with the rest.
export PYTHONUNBUFFERED=1
mkdir -p .demo
audit=.demo/audit.jsonl
: > "$audit"

echo "== Policies"
prunewarden validate policies/*.yaml examples/policies/*.yaml || exit $?

echo
echo "== Recorded sessions replayed under policies/default.yaml"
echo "   (one JSON line per decided event: .demo/decisions.jsonl; audit log: $audit;"
echo "   one plot per trace: .demo/plots/)"
echo
prunewarden replay --policy policies/default.yaml --decisions .demo/decisions.jsonl \
    --audit-log "$audit" --plot .demo/plots examples/traces/*.jsonl 2>&1 || exit $?

echo
echo "== What examples/policies/loose-candidate.yaml would change (exit 1 fails a CI gate)"
echo
prunewarden diff --base policies/default.yaml --candidate examples/policies/loose-candidate.yaml \
    examples/traces/*.jsonl
[ $? -eq 1 ] || exit 1

echo
echo "== The same candidate checked without traces: policy check proves it looser than the"
echo "   default, with inputs that show it (exit 1; docs/policy-check.md)"
echo
prunewarden policy check --against policies/default.yaml examples/policies/loose-candidate.yaml
[ $? -eq 1 ] || exit 1

echo
echo "== The same collapse under examples/policies/trial-audit.yaml: the halt is recorded,"
echo "   not enforced, and the pass goes ahead"
echo
prunewarden replay --policy examples/policies/trial-audit.yaml \
    examples/traces/collapse-narrowing.jsonl || exit $?

echo
echo "== A constraint filed as an ordinary turn: allowed by default, pinned by a rule in"
echo "   examples/policies/content-pins.yaml (custom conditions in CEL, docs/rules.md)"
prunewarden evaluate --format text --audit-log "$audit" \
    examples/inputs/eviction-untagged-negation.json || exit $?
prunewarden evaluate --format text --policy examples/policies/content-pins.yaml \
    --audit-log "$audit" examples/inputs/eviction-untagged-negation.json
[ $? -le 1 ] || exit 1

echo
echo "== Why a collapse halts, and what would have allowed it: explained under"
echo "   content-pins.yaml, its own log (docs/explain.md)"
: > .demo/explain.jsonl
prunewarden explain --format text --policy examples/policies/content-pins.yaml \
    --audit-log .demo/explain.jsonl examples/inputs/collapse-seed-narrowing.json
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
prunewarden validate "$deploy/replay.yaml" 2>&1
[ $? -eq 3 ] || exit 1

echo
echo "== The audit log: its hash chain, and what it recorded (drawn per day: .demo/plots/)"
prunewarden audit verify "$audit" || exit $?
prunewarden audit report --plot .demo/plots/audit-report.png "$audit" 2>&1 || exit $?

echo
echo "== The decision point over HTTP (docs/server.md): one server, one audit log, any language"
sock=.demo/pdp.sock
rm -f "$sock" .demo/serve-audit.jsonl .demo/sessions.sqlite3
prunewarden serve --policy policies/default.yaml --audit-log .demo/serve-audit.jsonl \
    --listen "unix:$sock" > .demo/serve.log 2>&1 &
server=$!
# Wait for the server's "listening" line (it is printed once the socket is bound), show it, and
# show the rest of its log once it has stopped.
tries=0
until grep -q "listening on" .demo/serve.log 2>/dev/null; do
    tries=$((tries + 1))
    if [ $tries -gt 300 ] || ! kill -0 $server 2>/dev/null; then cat .demo/serve.log; exit 1; fi
    sleep 0.1
done
shown=$(wc -l < .demo/serve.log)
cat .demo/serve.log
echo "-- A Python agent (prunewarden.client)"
python examples/clients/python/drive_session.py "unix:$sock" python-agent || { kill $server; exit 1; }
if command -v node > /dev/null && [ -e examples/clients/node/node_modules/@prunewarden/client ]; then
    echo
    echo "-- A Node agent (examples/clients/node, through @prunewarden/client)"
    node examples/clients/node/drive-session.mjs "unix:$sock" node-agent || { kill $server; exit 1; }
fi
kill -TERM $server
wait $server || exit $?
tail -n +$((shown + 1)) .demo/serve.log
prunewarden audit verify .demo/serve-audit.jsonl || exit $?
