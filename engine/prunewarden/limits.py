"""Every size limit prunewarden enforces, in one place.

The limits keep a malformed or hostile policy or document from exhausting memory, the stack or
time: each is checked where the input is read, and breaking one is a located problem
(:class:`~prunewarden.errors.PolicyError` or :class:`~prunewarden.errors.InputError`) that names
the limit, never a crash or a hang. ``docs/limits.md`` explains each one.

The JSON Schemas state the limits on the shape of documents too (``maxItems``, ``maxLength``,
``maxProperties``), so editors and other tools see them: :data:`SCHEMA_LIMITS` says where, and a
test proves that every such keyword in the schemas appears there with the same value.
"""

from __future__ import annotations

from typing import Final

# --- Policies ------------------------------------------------------------------------------------

#: Size of a policy file, in UTF-8 bytes.
MAX_POLICY_BYTES: Final = 1024 * 1024
#: Size of a policy bundle, compressed as fetched and again once decompressed.
MAX_BUNDLE_BYTES: Final = 64 * 1024 * 1024
#: Seconds one fetch of a bundle may take in all (connecting, headers, body), by default.
BUNDLE_FETCH_SECONDS: Final = 30.0
#: Nesting of YAML mappings and sequences.
MAX_YAML_DEPTH: Final = 64
#: Values in one YAML document after alias expansion: a "billion laughs" stops here.
MAX_YAML_NODES: Final = 200_000
#: Custom rules in one policy (``spec.rules``).
MAX_RULES: Final = 256
#: Characters in one rule expression (``when``, ``message_expression``); enforced by
#: :mod:`prunewarden.rules._compiler`, which states the same number (a test holds them equal),
#: beside its limits on an expression's nesting.
MAX_EXPRESSION_CHARS: Final = 2048
#: Characters in a rule's or a guardrail validator's ``message``.
MAX_RULE_MESSAGE_CHARS: Final = 1024
#: Guardrail validators in ``spec.validators``, and fields a base policy locks
#: (``spec.locked``).
MAX_VALIDATORS: Final = 256
MAX_LOCKED: Final = 256
#: Characters of the ``extends`` reference to a base policy.
MAX_EXTENDS_CHARS: Final = 1024
#: Named params in ``spec.params``, and items in one list param.
MAX_PARAMS: Final = 256
MAX_PARAM_ITEMS: Final = 1024
#: Characters in ``metadata.description`` and in a rule's or validator's ``description``.
MAX_DESCRIPTION_CHARS: Final = 4096
#: Kinds listed in ``spec.eviction.pinned_kinds``.
MAX_PINNED_KINDS: Final = 64
#: Labels in a policy's ``metadata.labels`` (``environment: production``, read by policy check).
MAX_POLICY_LABELS: Final = 64
#: Characters of a policy label's name (a Kubernetes label name's length).
MAX_LABEL_NAME_CHARS: Final = 63
#: Characters of a policy label's value.
MAX_LABEL_VALUE_CHARS: Final = 256
#: Patterns in ``spec.fidelity.error_patterns`` (a summary matching one is refused as an error).
MAX_ERROR_PATTERNS: Final = 64
#: Characters of one fidelity error pattern.
MAX_ERROR_PATTERN_CHARS: Final = 1024

# --- Rules at run time (docs/rules.md: "Budgets") -------------------------------------------------

#: CPU time all the rules of one decision may spend together (each rule also has its own
#: ``timeout_ms``); guardrail validators share the same budget when a policy loads.
MAX_DECISION_RULE_MS: Final = 10_000
#: Characters of strings and items of lists one evaluation of an expression may create
#: (concatenation, ``lower``, ``string``, the folding ``contains_any`` does): as much as one whole
#: input document again. Memory is otherwise bounded only by time.
MAX_RULE_ALLOCATION: Final = 64 * 1024 * 1024
#: Worst-case steps of one ``matches`` call, priced before it runs: characters searched times the
#: size of the compiled RE2 program (what RE2's NFA takes when its DFA runs out of memory). One
#: search cannot be interrupted, so its worst case must fit before it starts.
MAX_MATCH_STEPS: Final = 16 * 1024 * 1024
#: Characters of a ``matches`` pattern (a pattern may come from the input).
MAX_MATCH_PATTERN_CHARS: Final = 8192
#: Memory RE2 may use for one compiled pattern (its program and its DFA cache).
MAX_MATCH_MEMORY_BYTES: Final = 1024 * 1024
#: Characters of a text ``duration()`` or ``timestamp()`` parses, or a time zone a
#: timestamp's ``getHours()`` (and the other accessors) look up. Parsing runs in one call no
#: check can interrupt, and took 0.5 s per megabyte of duration text: a text priced over the limit
#: is refused before it is parsed. The longest RFC 3339 timestamp is 35 characters.
MAX_TIME_TEXT_CHARS: Final = 256

# --- Input documents -----------------------------------------------------------------------------

#: Characters of one input document's JSON text.
MAX_INPUT_CHARS: Final = 64 * 1024 * 1024
#: Nesting of arrays and objects in an input document. A valid document nests four deep; the
#: limit keeps a malformed one from exhausting the stack while its errors are reported.
MAX_INPUT_DEPTH: Final = 32
#: Snapshots in a collapse ``history``.
MAX_SNAPSHOTS: Final = 10_000
#: Scores in one snapshot or baseline.
MAX_ENTRIES: Final = 100_000
#: Ids in one list: ``pinned``, ``eviction_candidates``, ``score_dependencies``,
#: ``derived_from``, ``tombstones``.
MAX_IDS: Final = 100_000
#: Segments in one eviction pass (:meth:`Engine.authorize_evictions`) or in the window of a
#: pruning-pass plan.
MAX_SEGMENTS: Final = 100_000
#: Labels a decision document (or a server's ``Prunewarden-Labels`` header) carries into its
#: decisions' records.
MAX_LABELS: Final = 64
#: Tenants (policies chosen per request by labels) of one server's ``--tenants`` file.
MAX_TENANTS: Final = 64
#: Tokens one tenant of a ``--tenants`` file lists (``tokens:``), and the characters of one.
MAX_TENANT_TOKENS: Final = 8
MAX_TOKEN_CHARS: Final = 512
#: Rules of a policy's ``spec.classify`` (the kinds given to segments that arrive without one).
MAX_CLASSIFY_RULES: Final = 256
#: Entries in a segment's free-form ``metadata`` (read only by rules).
MAX_METADATA_ENTRIES: Final = 256
#: Spans in one prune request.
MAX_SPANS: Final = 100_000
#: Turns in a prune request's ``turns``.
MAX_TURNS: Final = 10_000
#: Characters of an entry, segment or span id (and of a plan's ``session_id``).
MAX_ID_CHARS: Final = 256
#: Characters of a segment ``kind`` (and of a pinned kind in a policy).
MAX_KIND_CHARS: Final = 64
#: Decimal digits of an integer in a document: Python's own limit for turning an integer into
#: text (JSON text cannot carry a longer one; a document built in Python could).
MAX_INTEGER_DIGITS: Final = 4300
INTEGER_CEILING: Final = 10**MAX_INTEGER_DIGITS

# --- Traces --------------------------------------------------------------------------------------

#: Bytes of one line of a trace (one event); a longer line is skipped unread, as a problem.
MAX_TRACE_LINE_BYTES: Final = 8 * 1024 * 1024
#: Traces one glob over a remote store (``s3://bucket/traces/*/*.jsonl.gz``) may name: a pattern
#: matching more is refused before any is read.
MAX_TRACE_FILES: Final = 1_000_000
#: Characters of an event's or a header's ``note``.
MAX_NOTE_CHARS: Final = 1000
#: Bytes one compressed trace (``.gz``, ``.zst``) may decompress to; reading stops there, with a
#: problem at the line reached. A 16 KB ``.zst`` of one endless line decompressed for 135 s.
MAX_DECOMPRESSED_BYTES: Final = 16 * 1024**3
#: Decompressed bytes per compressed byte a trace may reach once it has decompressed to
#: :data:`DECOMPRESSION_RATIO_GRACE_BYTES`: JSON Lines compress 5 to 50 times, a bomb a thousand
#: (gzip) to tens of thousands (zstd) of times.
MAX_DECOMPRESSION_RATIO: Final = 500
#: Decompressed bytes read before the ratio is held (the first lines of a trace may compress far
#: better than the rest, and a small trace cannot be a bomb).
DECOMPRESSION_RATIO_GRACE_BYTES: Final = 64 * 1024 * 1024

# --- The server (prunewarden serve) -------------------------------------------------------------

#: Bytes of one request body; a longer one is refused (HTTP 413) before it is read whole. A JSON
#: text of MAX_INPUT_CHARS characters fits when it is ASCII, as JSON documents almost always are.
MAX_REQUEST_BYTES: Final = MAX_INPUT_CHARS
#: Seconds one request may take from its body being read to its answer; past that the caller gets
#: HTTP 503 (a decision still running is logged when it ends, and never returned).
REQUEST_SECONDS: Final = 30.0
#: Seconds a session may stay idle before the server forgets it (its state and its halt).
SESSION_IDLE_SECONDS: Final = 24 * 3600.0
#: Sessions the server keeps in memory between calls; past it the least recently used one that
#: is idle and saved goes back to the store (a later call reopens it from there).
MAX_LIVE_SESSIONS: Final = 1000
#: Connections open at once; one more is answered HTTP 503 and closed before it is read.
MAX_CONNECTIONS: Final = 1000
#: Seconds a client may take to send a request's headers (from connecting, or from the first
#: byte of its next request); past it the connection is dropped.
HEADER_SECONDS: Final = 10.0
#: Seconds a client may take to send a request's body once its headers are in, and may leave an
#: answer unread; past it the connection is closed (HTTP 408 when nothing was answered yet).
BODY_SECONDS: Final = 60.0
#: Seconds a keep-alive connection may stay idle between two requests.
KEEP_ALIVE_SECONDS: Final = 5.0
#: Decision ids an answer lists in its ``Prunewarden-Decision-Ids`` header; an answer carrying
#: more (a pass over many segments) lists them in its body only, its header giving their count.
MAX_HEADER_DECISION_IDS: Final = 64
#: Request bodies being read at once hold at most this many times MAX_REQUEST_BYTES (the
#: request-size limit in force); a body that would pass it is refused (HTTP 503, retry).
PENDING_BODY_REQUESTS: Final = 4

# --- The memory tool (prunewarden.integrations.memory) -----------------------------------------

#: Bytes of one memory file, written or found on disk (the tool's ``max_file_bytes`` default).
MAX_MEMORY_FILE_BYTES: Final = 256 * 1024
#: Memory files in the directory (the tool's ``max_files`` default); every edit reads them all.
MAX_MEMORY_FILES: Final = 10_000
#: Characters of a memory path: it is a segment id (MAX_ID_CHARS), and a pinned memory's rewrite
#: adds "@" and twelve hex digits to it.
MAX_MEMORY_PATH_CHARS: Final = 240

# --- Reports -------------------------------------------------------------------------------------

#: Problems reported for one policy or document; a note says when more were found. Reporting a
#: million bad values would take longer than any caller waits.
MAX_PROBLEMS: Final = 100
#: Characters of one problem's path or message where it is kept or served (a bundle's problems in
#: records, ``/readyz`` and statuses): a name or value quoted from a hostile file is shortened.
MAX_PROBLEM_CHARS: Final = 512

# --- the audit log -----------------------------------------------------------------------------

#: The shortest HMAC key a keyed audit log accepts: the size of the SHA-256 output it keys
#: (RFC 2104, section 3).
MIN_KEY_BYTES: Final = 32
#: Seconds one write to a FIFO or character device may wait for a full pipe to drain before the
#: record is refused (``audit_unavailable``).
STREAM_WRITE_SECONDS: Final = 1.0
#: Bytes of one audit-log line a writer parses; a longer line is read in chunks, and is a record
#: when its body hashes to the seal it ends with (else it is counted as torn).
MAX_PARSED_LINE: Final = 16 * 1024 * 1024
#: The longest line ``audit sql`` reads: longer than any record a writer makes (a pass over
#: MAX_SEGMENTS segments, or a decision logging a MAX_INPUT_CHARS input, escaped).
MAX_SQL_LINE_BYTES: Final = 512 * 1024 * 1024
#: The largest batch ``audit collect`` takes, once decompressed (one ~50 MB pass record fits).
MAX_SHIP_BATCH_BYTES: Final = 256 * 1024 * 1024
#: How many of a replica's latest record hashes ``audit collect`` remembers to tell a duplicate
#: from a gap: more than a shipper's buffer sends again after a restart.
SHIP_DEDUP_RECORDS: Final = 100_000
#: Replicas ``audit collect``'s ``/metrics`` names as label values (the first ones by name); the
#: counts of the others are summed under ``replica="_other"``.
MAX_COLLECT_METRIC_REPLICAS: Final = 1000
#: The largest status document ``audit collect`` keeps (``POST /v1/status``).
MAX_STATUS_BYTES: Final = 1024 * 1024


#: Where the schemas state a limit: (schema, JSON pointer to the keyword) -> value.
SCHEMA_LIMITS: Final[dict[tuple[str, str], int]] = {
    ("input", "/$defs/id/maxLength"): MAX_ID_CHARS,
    ("input", "/$defs/ids/maxItems"): MAX_IDS,
    ("input", "/$defs/scores/maxProperties"): MAX_ENTRIES,
    ("input", "/$defs/collapse/properties/history/maxItems"): MAX_SNAPSHOTS,
    ("input", "/$defs/collapse/properties/labels/maxProperties"): MAX_LABELS,
    ("input", "/$defs/eviction/properties/labels/maxProperties"): MAX_LABELS,
    ("input", "/$defs/segment/properties/kind/maxLength"): MAX_KIND_CHARS,
    ("input", "/$defs/segment/properties/metadata/maxProperties"): MAX_METADATA_ENTRIES,
    ("input", "/$defs/staleness/properties/spans/maxItems"): MAX_SPANS,
    ("input", "/$defs/staleness/properties/turns/maxItems"): MAX_TURNS,
    ("input", "/$defs/staleness/properties/labels/maxProperties"): MAX_LABELS,
    ("input", "/$defs/window_segment/properties/kind/maxLength"): MAX_KIND_CHARS,
    ("input", "/$defs/window_segment/properties/metadata/maxProperties"): MAX_METADATA_ENTRIES,
    ("input", "/$defs/plan/properties/session_id/maxLength"): MAX_ID_CHARS,
    ("input", "/$defs/plan/properties/labels/maxProperties"): MAX_LABELS,
    ("input", "/$defs/plan/properties/segments/maxItems"): MAX_SEGMENTS,
    ("input", "/$defs/plan/properties/history/maxItems"): MAX_SNAPSHOTS,
    ("input", "/$defs/plan/properties/turns/maxItems"): MAX_TURNS,
    # A transition's windows are windows (MAX_SEGMENTS each); what made the edit is named in
    # no more characters than an id.
    ("input", "/$defs/transition_segment/properties/kind/maxLength"): MAX_KIND_CHARS,
    (
        "input",
        "/$defs/transition_segment/properties/metadata/maxProperties",
    ): MAX_METADATA_ENTRIES,
    ("input", "/$defs/transition/properties/before/maxItems"): MAX_SEGMENTS,
    ("input", "/$defs/transition/properties/after/maxItems"): MAX_SEGMENTS,
    ("input", "/$defs/transition/properties/applied_by/maxLength"): MAX_ID_CHARS,
    ("input", "/$defs/transition/properties/session_id/maxLength"): MAX_ID_CHARS,
    ("input", "/$defs/transition/properties/labels/maxProperties"): MAX_LABELS,
    ("tenants", "/properties/tenants/maxItems"): MAX_TENANTS,
    ("tenants", "/$defs/tenant/properties/selector/properties/matchLabels/maxProperties"): (
        MAX_LABELS
    ),
    (
        "tenants",
        "/$defs/tenant/properties/selector/properties/matchLabels/propertyNames/maxLength",
    ): MAX_LABEL_NAME_CHARS,
    (
        "tenants",
        "/$defs/tenant/properties/selector/properties/matchLabels/additionalProperties/maxLength",
    ): MAX_LABEL_VALUE_CHARS,
    ("tenants", "/$defs/tenant/properties/policy/maxLength"): MAX_EXTENDS_CHARS,
    ("tenants", "/$defs/tenant/properties/shadow/maxLength"): MAX_EXTENDS_CHARS,
    ("tenants", "/$defs/tenant/properties/lock/maxLength"): MAX_EXTENDS_CHARS,
    ("tenants", "/$defs/tenant/properties/tokens/maxItems"): MAX_TENANT_TOKENS,
    ("tenants", "/$defs/token/oneOf/0/maxLength"): MAX_TOKEN_CHARS,
    ("tenants", "/$defs/token/oneOf/1/properties/token_file/maxLength"): MAX_EXTENDS_CHARS,
    ("trace", "/$defs/note/maxLength"): MAX_NOTE_CHARS,
    ("trace", "/$defs/session/properties/labels/maxProperties"): MAX_LABELS,
    ("trace", "/$defs/prune/properties/spans/maxItems"): MAX_SPANS,
    ("trace", "/$defs/pass/properties/segments/maxItems"): MAX_SEGMENTS,
    ("trace", "/$defs/transition/properties/before/maxItems"): MAX_SEGMENTS,
    ("trace", "/$defs/transition/properties/after/maxItems"): MAX_SEGMENTS,
    ("trace", "/$defs/transition/properties/applied_by/maxLength"): MAX_ID_CHARS,
    # What rules read is built from an input, so it is as large as the input allows: the
    # static cost estimate of a rule (rules._cost) reads its sizes from here.
    ("rule-variables", "/$defs/ids/maxItems"): MAX_IDS,
    ("rule-variables", "/$defs/ids/items/maxLength"): MAX_ID_CHARS,
    ("rule-variables", "/$defs/scores/maxProperties"): MAX_ENTRIES,
    ("rule-variables", "/$defs/collapse/properties/spreads/maxItems"): MAX_SNAPSHOTS,
    ("rule-variables", "/$defs/collapse/properties/canary/properties/id/maxLength"): MAX_ID_CHARS,
    ("rule-variables", "/$defs/segment/properties/id/maxLength"): MAX_ID_CHARS,
    ("rule-variables", "/$defs/segment/properties/kind/maxLength"): MAX_KIND_CHARS,
    ("rule-variables", "/$defs/segment/properties/text/maxLength"): MAX_INPUT_CHARS,
    ("rule-variables", "/$defs/segment/properties/metadata/maxProperties"): MAX_METADATA_ENTRIES,
    ("rule-variables", "/$defs/span/properties/span_id/maxLength"): MAX_ID_CHARS,
    ("rule-variables", "/$defs/span/properties/text/maxLength"): MAX_INPUT_CHARS,
    ("rule-variables", "/$defs/staleness/properties/spans/maxItems"): MAX_SPANS,
    ("rule-variables", "/$defs/staleness/properties/turns/maxItems"): MAX_TURNS,
    ("rule-variables", "/$defs/window_segment/properties/id/maxLength"): MAX_ID_CHARS,
    ("rule-variables", "/$defs/window_segment/properties/kind/maxLength"): MAX_KIND_CHARS,
    ("rule-variables", "/$defs/window_segment/properties/text/maxLength"): MAX_INPUT_CHARS,
    (
        "rule-variables",
        "/$defs/window_segment/properties/metadata/maxProperties",
    ): MAX_METADATA_ENTRIES,
    (
        "rule-variables",
        "/$defs/transition/properties/transition/properties/applied_by/maxLength",
    ): MAX_ID_CHARS,
    ("rule-variables", "/$defs/transition/properties/applied_by/maxLength"): MAX_ID_CHARS,
    ("rule-variables", "/$defs/transition/properties/before/maxItems"): MAX_SEGMENTS,
    ("rule-variables", "/$defs/transition/properties/after/maxItems"): MAX_SEGMENTS,
    ("policy", "/properties/metadata/properties/description/maxLength"): MAX_DESCRIPTION_CHARS,
    (
        "policy",
        "/properties/spec/properties/eviction/properties/pinned_kinds/maxItems",
    ): MAX_PINNED_KINDS,
    (
        "policy",
        "/properties/spec/properties/eviction/properties/pinned_kinds/items/maxLength",
    ): MAX_KIND_CHARS,
    (
        "policy",
        "/properties/spec/properties/transition/properties/pinned_kinds/maxItems",
    ): MAX_PINNED_KINDS,
    (
        "policy",
        "/properties/spec/properties/transition/properties/pinned_kinds/items/maxLength",
    ): MAX_KIND_CHARS,
    ("policy", "/properties/spec/properties/params/maxProperties"): MAX_PARAMS,
    ("policy", "/$defs/param/anyOf/1/maxItems"): MAX_PARAM_ITEMS,
    ("policy", "/properties/spec/properties/rules/maxItems"): MAX_RULES,
    ("policy", "/$defs/rule/properties/description/maxLength"): MAX_DESCRIPTION_CHARS,
    ("policy", "/$defs/rule/properties/message/maxLength"): MAX_RULE_MESSAGE_CHARS,
    ("policy", "/$defs/validator/properties/description/maxLength"): MAX_DESCRIPTION_CHARS,
    ("policy", "/$defs/validator/properties/message/maxLength"): MAX_RULE_MESSAGE_CHARS,
    ("policy", "/properties/spec/properties/validators/maxItems"): MAX_VALIDATORS,
    ("policy", "/properties/spec/properties/locked/maxItems"): MAX_LOCKED,
    ("policy", "/properties/extends/maxLength"): MAX_EXTENDS_CHARS,
    ("policy", "/properties/metadata/properties/labels/maxProperties"): MAX_POLICY_LABELS,
    (
        "policy",
        "/properties/metadata/properties/labels/propertyNames/maxLength",
    ): MAX_LABEL_NAME_CHARS,
    (
        "policy",
        "/properties/metadata/properties/labels/additionalProperties/maxLength",
    ): MAX_LABEL_VALUE_CHARS,
    ("policy", "/properties/spec/properties/fidelity/properties/error_patterns/maxItems"): (
        MAX_ERROR_PATTERNS
    ),
    (
        "policy",
        "/properties/spec/properties/fidelity/properties/error_patterns/items/maxLength",
    ): MAX_ERROR_PATTERN_CHARS,
    ("policy", "/properties/spec/properties/classify/properties/rules/maxItems"): (
        MAX_CLASSIFY_RULES
    ),
    (
        "policy",
        "/properties/spec/properties/classify/properties/rules/items/properties/match/properties/pattern/maxLength",
    ): MAX_MATCH_PATTERN_CHARS,
    (
        "policy",
        "/properties/spec/properties/classify/properties/rules/items/properties/match/properties/tool/maxLength",
    ): MAX_ID_CHARS,
    (
        "policy",
        "/properties/spec/properties/classify/properties/rules/items/properties/kind/maxLength",
    ): MAX_KIND_CHARS,
    ("policy", "/properties/spec/properties/compaction/properties/block_when/maxLength"): (
        MAX_EXPRESSION_CHARS
    ),
    ("policy", "/properties/spec/properties/compaction/properties/block_message/maxLength"): (
        MAX_RULE_MESSAGE_CHARS
    ),
}
