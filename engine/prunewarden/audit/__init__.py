"""The audit log: decision records, the hash chain, masks, the log file, verification and review.

SQL over the logs and their Parquet export live in :mod:`prunewarden.review`.

Imports the layers below it (policy, inputs, decision); nothing above it.
"""

from __future__ import annotations

from prunewarden.audit._chain import seal
from prunewarden.audit._columns import columns_record
from prunewarden.audit._fields import authorization_header, describe
from prunewarden.audit._log import FSYNC_MODES, AuditLog, FsyncMode
from prunewarden.audit._pass import decision_rows, pass_record, verdict_entry
from prunewarden.audit._record import (
    DecisionContext,
    decision_record,
    get_logger,
    input_digest,
    log_decision,
    log_policy_reload_failed,
    log_policy_reloaded,
    log_policy_rollback,
    session_rebound_record,
    session_state_rejected_record,
    subject_of,
    texts_of,
)
from prunewarden.audit._redaction import DEFAULT_MASKS
from prunewarden.audit._review import (
    EPISODE_COLUMNS,
    REPORT_COLUMNS,
    RecordFilter,
    Skipped,
    find_authorization,
    halt_episodes,
    parse_time,
    query,
    report,
)
from prunewarden.audit._rotation import rotated_files
from prunewarden.audit._verify import verify_files

__all__ = [
    "DEFAULT_MASKS",
    "EPISODE_COLUMNS",
    "FSYNC_MODES",
    "REPORT_COLUMNS",
    "AuditLog",
    "DecisionContext",
    "FsyncMode",
    "RecordFilter",
    "Skipped",
    "authorization_header",
    "columns_record",
    "decision_record",
    "decision_rows",
    "describe",
    "find_authorization",
    "get_logger",
    "halt_episodes",
    "input_digest",
    "log_decision",
    "log_policy_reload_failed",
    "log_policy_reloaded",
    "log_policy_rollback",
    "parse_time",
    "pass_record",
    "query",
    "report",
    "rotated_files",
    "seal",
    "session_rebound_record",
    "session_state_rejected_record",
    "subject_of",
    "texts_of",
    "verdict_entry",
    "verify_files",
]
