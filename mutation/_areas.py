"""The safety-critical modules and the tests of their area.

Each module's tests run in two stages: first the tests that own its behaviour (most mutants die
there, in a second or two), then, only for a mutant that survived them, the wider tests of its
area. A run stops at the first failure. The sets are chosen so that the whole run finishes on a
2-core machine within an hour: in-process tests, not the ones that start servers or processes.
"""

from __future__ import annotations

Stages = tuple[tuple[str, ...], ...]

GUARDS = ("tests/guards", "tests/test_cases.py")
PIPELINE = ("tests/pipeline", "tests/test_faults.py", "tests/test_cases.py")
RULES = (
    "tests/rules/test_budget.py",
    "tests/rules/test_rules.py",
    "tests/rules/test_expressions.py",
)
POLICY = (
    "tests/policy/test_lock.py",
    "tests/policy/test_overlays.py",
    "tests/policy/test_policy.py",
)
AUDIT = ("tests/audit/test_chain.py", "tests/audit/test_record.py")
SESSION = ("tests/session", "tests/engine")
ADAPTERS = ("tests/integrations/test_pass.py", "tests/test_planner.py")
CALIBRATE = ("tests/replay/test_fit.py",)

EXACT_GUARDS = "tests/guards/test_exact_checks.py"
REASONS = "tests/guards/test_reason_details.py"
EXPLAINED = "tests/guards/test_explained_exactly.py"
EXACT_AUDIT = "tests/audit/test_exact_verify.py"
REPORT = "tests/audit/test_verify_report.py"
HALTS = "tests/session/test_halts_held.py"
ACCESS = "tests/server/test_access_rules.py"
APP = "tests/server/test_app_in_process.py"
CONFIG = "tests/server/test_config_rules.py"
SESSIONS_APP = "tests/server/test_sessions_in_process.py"
EXPLAIN_ROUTE = "tests/server/test_explain_route.py"
# The columnar paths (an eviction pass and a plan decided over columns, staleness over columns).
PASS_COLUMNS = ("tests/engine/test_columnar_passes.py", "tests/engine/test_pass_columns.py")
PLAN_COLUMNS = "tests/engine/test_columnar_plans.py"
HOOKS = "tests/engine/test_decision_hooks.py"
STALENESS_COLUMNS = "tests/inputs/test_columns.py"
V3_RECORDS = "tests/audit/test_pass_records.py"
PLANNER = "tests/test_planner.py"
SHIPPING = ("tests/shipping/test_shipper.py", "tests/shipping/test_reading.py")
TENANTS = ("tests/server/test_tenants.py", "tests/server/test_tenant_sessions.py")
BUNDLES = ("tests/bundle/test_bundle.py", "tests/bundle/test_bundle_shadow.py")
MEMORY = ("tests/integrations/test_memory.py", "tests/integrations/test_memory_audit.py")
FIDELITY = (
    "tests/fidelity",
    "tests/guards/test_transition_fidelity.py",
    "tests/guards/test_transition_meaning.py",
)
TRANSITION = ("tests/guards/test_transition.py", "tests/guards/test_transition_corpus.py")

# Module (under engine/) -> its stages of tests.
AREAS: dict[str, Stages] = {
    "prunewarden/guards/collapse.py": (
        (
            REASONS,
            "tests/guards/test_collapse.py",
            "tests/guards/test_relative_floor_history.py",
            "tests/guards/test_collapse_explained.py",
            "tests/guards/test_collapse_cusum.py",
            "tests/guards/test_collapse_tracking.py",
        ),
        GUARDS,
    ),
    "prunewarden/guards/eviction.py": (
        (EXACT_GUARDS, REASONS, EXPLAINED, "tests/guards/test_eviction.py", *PASS_COLUMNS),
        (*GUARDS, PLAN_COLUMNS),
    ),
    "prunewarden/guards/staleness.py": (
        (EXACT_GUARDS, REASONS, EXPLAINED, "tests/guards/test_staleness.py", STALENESS_COLUMNS),
        GUARDS,
    ),
    "prunewarden/guards/transition.py": (TRANSITION, (*GUARDS, *FIDELITY)),
    "prunewarden/guards/_fidelity.py": (FIDELITY, (*TRANSITION, *GUARDS)),
    "prunewarden/fidelity/_check.py": (FIDELITY, TRANSITION),
    "prunewarden/fidelity/_facts.py": (FIDELITY, TRANSITION),
    "prunewarden/fidelity/_meaning.py": (FIDELITY, TRANSITION),
    # What a pass or a staleness document must be to be decided over columns.
    "prunewarden/inputs/_columns.py": (
        (STALENESS_COLUMNS, "tests/inputs/test_passes.py", *PASS_COLUMNS),
        ("tests/inputs", PLAN_COLUMNS),
    ),
    "prunewarden/inputs/_validation.py": (
        ("tests/inputs/test_transitions.py", "tests/inputs/test_documents.py", STALENESS_COLUMNS),
        ("tests/inputs", *TRANSITION),
    ),
    "prunewarden/pipeline/_columns.py": ((*PASS_COLUMNS, HOOKS), (PLAN_COLUMNS, *PIPELINE)),
    "prunewarden/engine/_passes.py": ((*PASS_COLUMNS, HOOKS), (PLAN_COLUMNS, "tests/engine")),
    "prunewarden/engine/_engine.py": (
        ("tests/pipeline/test_shadow.py", STALENESS_COLUMNS, *PASS_COLUMNS),
        ("tests/engine", "tests/pipeline"),
    ),
    "prunewarden/engine/_deciding.py": (
        ("tests/pipeline/test_shadow.py", STALENESS_COLUMNS, *PASS_COLUMNS),
        ("tests/engine", "tests/pipeline"),
    ),
    "prunewarden/planner/_log.py": ((PLANNER, PLAN_COLUMNS), ("tests/engine", HALTS)),
    "prunewarden/planner/_selection.py": ((PLANNER, PLAN_COLUMNS), ("tests/engine", HALTS)),
    "prunewarden/pipeline/_compile.py": (
        ("tests/pipeline/test_calibration_record.py", "tests/test_faults.py"),
        PIPELINE,
    ),
    "prunewarden/pipeline/_calibration.py": (
        (
            "tests/pipeline/test_calibrated_transitions.py",
            "tests/pipeline/test_calibrated_requests.py",
            "tests/pipeline/test_calibration.py",
        ),
        PIPELINE,
    ),
    "prunewarden/rules/_budget.py": (
        ("tests/rules/test_deadline.py", "tests/rules/test_budget_clock.py"),
        RULES,
    ),
    "prunewarden/rules/_evaluation.py": (
        ("tests/rules/test_deadline.py", "tests/rules/test_evaluation_errors.py"),
        RULES,
    ),
    "prunewarden/policy/_lock.py": (
        (EXACT_AUDIT, "tests/policy/test_lock_errors.py", "tests/policy/test_lock.py"),
        POLICY,
    ),
    "prunewarden/policy/_guardrails.py": (
        (
            "tests/policy/test_guardrail_reach.py",
            "tests/policy/test_overlays.py",
            "tests/policy/test_files.py::TestLocksCoverWhatARuleReads",
        ),
        POLICY,
    ),
    "prunewarden/audit/_chain.py": (
        (EXACT_AUDIT, REPORT, "tests/audit/test_canonical_forms.py"),
        AUDIT,
    ),
    # A receiver's copy is verified across a range its shipper dropped (records_dropped).
    "prunewarden/audit/_verify.py": (
        (EXACT_AUDIT, REPORT, "tests/audit/test_records_dropped.py"),
        (*AUDIT, V3_RECORDS, "tests/shipping/test_collector.py"),
    ),
    # Version 3 pass records: written over columns, read back as decisions.
    "prunewarden/audit/_columns.py": (
        (V3_RECORDS, "tests/audit/test_record.py"),
        (*AUDIT, *PASS_COLUMNS, PLAN_COLUMNS),
    ),
    "prunewarden/audit/_pass.py": (
        (V3_RECORDS, "tests/audit/test_record.py"),
        (*AUDIT, *PASS_COLUMNS, PLAN_COLUMNS),
    ),
    "prunewarden/_json.py": (
        ("tests/test_json.py", "tests/audit/test_canonical_forms.py"),
        (STALENESS_COLUMNS, *AUDIT),
    ),
    "prunewarden/shipping/_shipper.py": (SHIPPING, ("tests/shipping/test_collector.py",)),
    "prunewarden/shipping/_cursor.py": (SHIPPING, ("tests/shipping/test_collector.py",)),
    "prunewarden/shipping/_reading.py": (SHIPPING, ("tests/shipping/test_collector.py",)),
    "prunewarden/shipping/_receiving.py": (("tests/shipping/test_collector.py",), SHIPPING),
    "prunewarden/shipping/_collect.py": (
        ("tests/shipping/test_collector.py", "tests/shipping/test_collector_server.py"),
        SHIPPING,
    ),
    "prunewarden/server/_collector.py": (
        ("tests/shipping/test_collector_server.py",),
        ("tests/shipping/test_collector.py",),
    ),
    "prunewarden/server/_tenants.py": (TENANTS, ("tests/server/test_tenant_status.py",)),
    "prunewarden/server/_tenant_config.py": (TENANTS, ("tests/server/test_tenant_status.py",)),
    "prunewarden/bundle/_verify.py": (BUNDLES, ("tests/test_reload_bundle.py",)),
    "prunewarden/bundle/_manifest.py": (BUNDLES, ("tests/test_reload_bundle.py",)),
    "prunewarden/bundle/_signing.py": (BUNDLES, ("tests/test_reload_bundle.py",)),
    "prunewarden/integrations/memory.py": (
        MEMORY,
        ("tests/integrations/test_memory_properties.py",),
    ),
    "prunewarden/integrations/_memory_edits.py": (
        MEMORY,
        ("tests/integrations/test_memory_properties.py",),
    ),
    "prunewarden/integrations/_memory_files.py": (
        MEMORY,
        ("tests/integrations/test_memory_properties.py",),
    ),
    "prunewarden/session/_session.py": (
        (
            HALTS,
            "tests/session/test_session.py",
            "tests/session/test_session_documents.py",
            "tests/session/test_held_over_openings.py",
            "tests/guards/test_relative_floor_history.py",
            "tests/session/test_follow_reloads.py",
        ),
        SESSION,
    ),
    # What a session holds and how it keeps it (split from _session.py): the same tests own it.
    "prunewarden/session/_core.py": (
        (
            HALTS,
            "tests/session/test_session.py",
            "tests/session/test_session_documents.py",
            "tests/session/test_held_over_openings.py",
            "tests/guards/test_relative_floor_history.py",
            "tests/session/test_follow_reloads.py",
        ),
        SESSION,
    ),
    "prunewarden/session/_state.py": (
        (
            HALTS,
            "tests/session/test_state.py",
            "tests/session/test_pins_and_baselines.py",
            "tests/session/test_carry_over.py",
        ),
        SESSION,
    ),
    "prunewarden/session/_registry.py": (
        (HALTS, "tests/session/test_bypass.py", "tests/session/test_held_halts.py"),
        SESSION,
    ),
    "prunewarden/session/_store.py": (
        (HALTS, "tests/session/test_store.py", "tests/session/test_store_close.py"),
        SESSION,
    ),
    # The server's other tests start real servers: a survivor would cost half a minute each.
    "prunewarden/server/_app.py": ((APP, ACCESS, EXPLAIN_ROUTE), (SESSIONS_APP,)),
    # The credentials and the parts of a request, split from the app: the same tests reach them,
    # and the tenant tokens' own.
    "prunewarden/server/_credentials.py": (
        (ACCESS, APP, "tests/server/test_tenant_tokens.py"),
        (SESSIONS_APP,),
    ),
    "prunewarden/server/_request_parts.py": ((APP, ACCESS, EXPLAIN_ROUTE), (SESSIONS_APP,)),
    "prunewarden/server/_config.py": ((CONFIG, "tests/server/test_listen.py", ACCESS),),
    "prunewarden/server/_sessions.py": ((SESSIONS_APP, ACCESS, EXPLAIN_ROUTE), (APP,)),
    # The holding of sessions, split from the endpoints: the same tests reach it.
    "prunewarden/server/_holding.py": ((SESSIONS_APP, ACCESS, EXPLAIN_ROUTE), (APP,)),
    "prunewarden/integrations/_pass.py": (
        (
            "tests/integrations/test_pass_gates.py",
            "tests/integrations/test_pass_outcomes.py",
            "tests/integrations/test_pass_summaries.py",
        ),
        ADAPTERS,
    ),
    "prunewarden/replay/_fit.py": (
        ("tests/replay/test_fit_edges.py", "tests/replay/test_fit_counts.py"),
        (*CALIBRATE, "tests/replay/test_fit_cusum.py", "tests/replay/test_fit_horizon.py"),
    ),
}
