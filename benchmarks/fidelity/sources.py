"""The conversations the fidelity pairs are cut from.

The eight everyday tasks of ``examples/agents/conversations.py`` (the MiniLM example policy is
fitted on them) are read from that file; they carry times, prices, quantities and dates but few
identifiers or negations. Three engineering tasks below add what a coding or operations agent's
history carries: paths, flags, commands, versions, acronyms, quoted values and constraints worded
as negations, among them the seeds' UTC constraint and ``buf`` definition as the example inputs
(``examples/inputs/eviction-utc-constraint.json``) word them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents" / "conversations.py"

ENGINEERING: dict[str, list[str]] = {
    "utc-export": [
        "Fix the CSV exporter in src/report/export.py so that tests/test_export.py passes.",
        "All timestamps must be UTC; never emit local time.",
        "`buf` refers to the pre-compaction buffer, not the network buffer.",
        "The exporter calls datetime.now() without a tz argument on line 88.",
        "Run pytest -x tests/test_export.py -k timezone after each change.",
        "Do not touch vendor/ or the generated files under build/.",
        "The CI image pins Python 3.11.9 and runs in eu-west-1.",
        "Use datetime.now(tz=UTC) and format rows with isoformat(timespec='seconds').",
        "The failing case is test_export_rows_utc, which expects 2024-03-31T01:30:00+00:00.",
        "Never reformat unrelated code; keep the diff under 40 lines.",
        "Bump the package to v2.3.1 in pyproject.toml once the tests pass.",
        "Open the pull request against the release/2.3 branch, not main.",
    ],
    "payments-rollback": [
        "Roll back the payments API deployment that started failing at 14:05 UTC.",
        "The bad release is payments-api v4.12.0; the last good one is v4.11.3.",
        "The error rate on /v1/charges rose from 0.2% to 7.5% after the deploy.",
        "Run kubectl rollout undo deployment/payments-api -n prod to revert it.",
        "Do not restart the ledger-worker pods; they hold open transactions.",
        "The database migration 0042_add_currency_index must not be reverted.",
        "Set FEATURE_MULTI_CURRENCY=false in the ConfigMap before the rollback.",
        "Health checks on port 8,443 should pass within 90 seconds.",
        "Post an update in #incident-payments every 15 minutes.",
        "Never page the on-call DBA unless p99 latency exceeds 2,500 ms.",
        "After the rollback the error rate fell back to 0.3% within 6 minutes.",
        "Write the postmortem in docs/incidents/2024-05-17.md by Friday.",
    ],
    "nightly-etl": [
        "Move the nightly ETL job from cron to Airflow before the sprint ends.",
        "The job reads s3://acme-raw/events/ and writes the analytics.events_daily table.",
        "It has to finish before 06:00 UTC, when the dashboards refresh.",
        "Never drop rows with a null user_id; send them to the quarantine table.",
        "A run takes 47 minutes on 4 workers and costs about $12 a night.",
        "Run it with the KubernetesPodOperator and the image etl-runner:1.8.2.",
        "Do not enable catchup; backfills go through the backfill_events DAG.",
        "Set retries=3 and a retry delay of 10 minutes on every task.",
        "Partition the output by event_date, not by ingestion time.",
        "The schema has 23 columns; customer_tier was added in March.",
        "Alert #data-oncall when the row count drops by more than 15% from one day to the next.",
        "Keep the old cron entry disabled, not deleted, for two weeks.",
    ],
}


def conversations() -> dict[str, list[str]]:
    """Every conversation, the examples' first, by name."""
    spec = importlib.util.spec_from_file_location("example_conversations", EXAMPLES)
    if spec is None or spec.loader is None:
        msg = f"{EXAMPLES}: cannot be read as a module"
        raise ImportError(msg)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    examples: dict[str, list[str]] = module.CONVERSATIONS
    return {**examples, **ENGINEERING}
