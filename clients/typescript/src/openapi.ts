// Generated from schemas/openapi.v1.json and the JSON Schemas it names by
// scripts/generate-types.mjs (npm run generate). Do not edit: a test checks it is up to date.

export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The process is up */
        get: operations["health"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A policy is loaded and the audit log can be written */
        get: operations["readiness"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/schemas/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A bundled JSON Schema, by the file name its `$id` ends with */
        get: operations["schema"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/policy": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The policy in force: identity, digest, files, resolved document (of the tenant the labels choose) */
        get: operations["policy"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/policies": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Every tenant: its selector, its policy, bundle revision and shadow (docs/fleet.md) */
        get: operations["policies"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/status": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The policy and bundle in force, the last activation and error, decisions by outcome since start (docs/fleet.md) */
        get: operations["status"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/evaluate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Decide on one input document (stateless), as `prunewarden evaluate` */
        post: operations["evaluate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/plan": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Plan one pruning pass (stateless), as `prunewarden plan` */
        post: operations["plan"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/cycles": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Report one rewrite cycle's scores; the collapse decision on the session's history */
        post: operations["observe_cycle"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/turns": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Report one turn's mean relevance and tokens (no decision) */
        post: operations["observe_turn"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/evictions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** The eviction guard for one segment, refused while the session is halted */
        post: operations["authorize"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/prunes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** The staleness guard, with the turns the session observed */
        post: operations["prune"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/plans": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Plan one pruning pass with the session's history */
        post: operations["plan_session"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}/transitions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** The transition guard on an edit of the window, with the session's halt and pins */
        post: operations["verify"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/sessions/{session_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** What the session keeps */
        get: operations["state"];
        put?: never;
        post?: never;
        /** Forget the session: its history and its halt */
        delete: operations["delete_session"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        InputDocument: components["schemas"]["input.v1"];
        PlanDocument: components["schemas"]["input.v1.plan"];
        Snapshot: components["schemas"]["input.v1.snapshot"];
        Turn: components["schemas"]["input.v1.turn"];
        EvictionDocument: components["schemas"]["input.v1.eviction"];
        StalenessDocument: components["schemas"]["input.v1.staleness"];
        TransitionDocument: components["schemas"]["input.v1.transition"];
        Decision: components["schemas"]["decision.v1"];
        /** @description What a pruning pass may do, as `prunewarden plan` prints it */
        Plan: {
            evict: string[];
            tombstones: string[];
            pinned: string[];
            unscoreable: string[];
            recompute: string[];
            frozen: boolean;
            target_met: boolean;
            freed_tokens: number;
            decisions: components["schemas"]["decision.v1"][];
        };
        TurnObserved: {
            session_id: string;
            turn: number | null;
            halted: boolean;
            /** @description The policy that authorized the decision. */
            policy: {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
        };
        SessionState: {
            session_id: string;
            halted: boolean;
            state: components["schemas"]["session-state.v4"];
            /** @description The policy that authorized the decision. */
            policy: {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            /** @description With tenants: the session's */
            tenant?: string;
        };
        SessionDeleted: {
            session_id: string;
            deleted: boolean;
            /** @description The policy that authorized the decision. */
            policy: {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
        };
        Health: {
            /** @constant */
            status: "ok";
            /** @description The policy that authorized the decision. */
            policy: {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
        };
        Readiness: {
            status: string;
            checks: Record<string, never>;
            /** @description The policy that authorized the decision. */
            policy: {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            /** @description With `--bundle`: where it is fetched from, the revision in force, and the last fetch (a failed one keeps the last good bundle) */
            bundle?: {
                location: string;
                revision: string | null;
                healthy: boolean;
                last_fetch_at?: string | null;
                /** @enum {unknown} */
                last_fetch?: "reloaded" | "unchanged" | "failed" | null;
                problems: string[];
            };
            default_tenant?: string;
            /** @description Every tenant, in the order its selector is tried, with its policy, shadow and health (a server without --tenants: one, `default`) */
            tenants?: components["schemas"]["ReadyTenant"][];
        };
        Status: {
            /** @description false while the last reload of any tenant failed */
            healthy: boolean;
            started_at: string;
            engine_version: string;
            default_tenant: string;
            /** @description Every tenant, in the order its selector is tried, with its policy, shadow and health (a server without --tenants: one, `default`) */
            tenants: components["schemas"]["Tenant"][];
            /** @description the default tenant's policy */
            policy: {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            shadow: null | {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            bundle: null | {
                location: string;
                revision: string | null;
                healthy: boolean;
                last_fetch_at?: string | null;
                /** @enum {unknown} */
                last_fetch?: "reloaded" | "unchanged" | "failed" | null;
                problems: string[];
            };
            /** @description when the policy in force began */
            activated_at: string;
            last_reload: {
                at?: string | null;
                /** @enum {unknown} */
                outcome?: "reloaded" | "unchanged" | "failed" | null;
                problems?: string[];
            };
            /** @description the last reload or fetch that failed since start, even if a later one succeeded */
            last_error: null | {
                at?: string | null;
                problems?: string[];
            };
            /** @description decisions made since start, by outcome */
            decisions: {
                allow?: number;
                deny?: number;
                halt?: number;
            };
            log_shipping: null | {
                destinations: {
                    destination: string;
                    replica: string;
                    healthy: boolean;
                    shipped: number;
                    dropped: number;
                    buffered_records?: number;
                    buffered_bytes?: number;
                    last_shipped_hash?: string | null;
                    last_shipped_at?: string | null;
                    failing?: number;
                    last_error?: string | null;
                    last_error_at?: string | null;
                }[];
            };
            status_push: null | {
                url: string;
                interval: number;
                /** @description pushes the receiver accepted (2xx) */
                pushed: number;
                /** @description pushes that failed, for any reason */
                failed: number;
                last_push_at: string | null;
                last_failure: null | {
                    at?: string;
                    problem?: string;
                };
            };
        };
        PolicyInForce: {
            /** @description The policy that authorized the decision. */
            policy: {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            digest: string;
            sources: {
                path: string;
                sha256: string;
            }[];
            /** @description The resolved policy.v1 document */
            document: Record<string, never>;
            shadow: null | {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            /** @description With tenants: whose policy */
            tenant?: string;
        };
        Tenant: {
            name: string;
            default: boolean;
            selector: {
                matchLabels?: {
                    [key: string]: string;
                };
            };
            /** @description The policy that authorized the decision. */
            policy: {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            bundle_revision: string | null;
            shadow: null | {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            /** @description false while its last reload failed */
            healthy?: boolean;
            /** @enum {unknown} */
            last_reload?: "reloaded" | "unchanged" | "failed" | null;
            problems?: string[];
        };
        ReadyTenant: {
            name: string;
            default: boolean;
            /** @description The policy that authorized the decision. */
            policy: {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            bundle_revision: string | null;
            shadow: null | {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            /** @description false while its last reload failed */
            healthy?: boolean;
            /** @enum {unknown} */
            last_reload?: "reloaded" | "unchanged" | "failed" | null;
            problems?: string[];
        };
        /** @description The tenants in the order their selectors are tried (a server without --tenants: one, `default`, selecting every request) */
        Policies: {
            default: string;
            tenants: components["schemas"]["Tenant"][];
        };
        /** @description RFC 9457 problem details; `problems` holds the located problems the CLI prints */
        Problem: {
            /** Format: uri */
            type: string;
            title: string;
            status: number;
            detail: string;
            problems?: {
                file: string;
                line: number;
                column: number;
                path: string;
                message: string;
                text: string;
            }[];
        };
        /**
         * prunewarden decision v1
         * @description What a guard decided, why, and under which exact policy.
         */
        "decision.v1": {
            /** @description Unique id of this decision. */
            decision_id: string;
            /** @enum {unknown} */
            check: "collapse" | "eviction" | "staleness" | "transition";
            /**
             * @description The verdict, whatever the mode. Collapse refuses with halt, the others with deny.
             * @enum {unknown}
             */
            outcome: "allow" | "deny" | "halt";
            /** @description True when the guard's mode is enforce. False in audit mode (and off): callers proceed whatever the outcome. */
            enforced: boolean;
            /** @description Every finding; the first is the primary reason. */
            reasons: components["schemas"]["decision.v1.reason"][];
            /** @description Remediations, in order. */
            actions: components["schemas"]["decision.v1.action"][];
            /** @description The policy that authorized the decision. */
            policy: {
                name: string;
                version: string;
                digest: string;
                /** @description The revision of the signed policy bundle the policy came from (docs/fleet.md); absent when the policy was read from its own files. */
                bundle_revision?: string;
                /** @description The files the policy was resolved from, the policy's own first, then each policy it extends: path (builtin:<name> for a bundled policy) and the SHA-256 (hex) of the bytes read. */
                sources?: {
                    path: string;
                    sha256: string;
                }[];
            };
            /**
             * Format: date-time
             * @description UTC, RFC 3339, with Z.
             */
            evaluated_at: string;
            engine_version: string;
            /** @description staleness: span ids to keep, best first (all of them when refused). */
            kept?: string[];
            /** @description staleness: span ids to evict, in input order (none when refused). */
            evicted?: string[];
            /** @description A decision of a pruning pass (authorize_evictions, plan): the pass's id, shared by its decisions and named by its one audit record. decision_id is then <pass_id>-<index>. */
            pass_id?: string;
            /** @description A decision of a pruning pass: its place in the pass, the index of its verdict in the pass record. */
            index?: number;
            /** @description Only when the decision was explained (explain=True, prunewarden explain, ?explain=true; docs/explain.md): the guard's mode and a trace of every rule of the check. Each refusing reason of the guard then carries detail.would_allow (a list of alternatives {field, op, value, and?}, empty when no value of any field allows it) and detail.would_allow_text (the same in one sentence). */
            explanation?: {
                /** @enum {unknown} */
                mode: "enforce" | "audit" | "off";
                /** @description The CEL backend that evaluated the rules (null: the policy has none). */
                rule_backend: string | null;
                rules: components["schemas"]["decision.v1.rule_trace"][];
            };
        };
        "decision.v1.action": {
            action: "halt_pruning" | "freeze_buffer" | "escalate" | "pin" | "resolve_dependencies_first" | "rescore" | "write_tombstone" | "recompute" | "drop" | "keep_verbatim" | "restore" | "freeze";
            ids?: string[];
        };
        "decision.v1.reason": {
            code: components["schemas"]["decision.v1.reason_code"];
            message: string;
            detail: Record<string, never>;
        };
        /** @description Stable reason codes. */
        "decision.v1.reason_code": "insufficient_history" | "too_few_entries" | "spread_healthy" | "no_canary" | "canary_missing" | "canary_healthy" | "collapse_detected" | "authorized" | "pinned" | "unscoreable" | "perturbation_missing" | "unstable_score" | "no_tombstone" | "bound" | "unbound_score" | "hash_mismatch" | "poisoned_span" | "orphaned_parent" | "invalidation_gap" | "relevance_inflation" | "transition_clean" | "pinned_removed" | "group_split" | "unscored_removal" | "fact_lost" | "negation_lost" | "meaning_drift" | "summary_is_error" | "summary_opaque" | "check_disabled" | "internal_error" | "audit_unavailable" | "pruning_halted" | "group_member_refused" | "session_state_unavailable" | "compaction_recorded" | "compaction_blocked" | "compaction_restored" | string;
        /** @description One rule as it was decided: the value of each sub-expression visited (strings as their length and SHA-256, lists and maps as their size), the params it read, and its cost in nodes evaluated. Traced by cel-python whatever the backend. */
        "decision.v1.rule_trace": {
            rule: string;
            effect: string;
            mode: string;
            matched: boolean;
            reads: string[];
            params: Record<string, never>;
            /** @constant */
            traced_with: "cel-python";
            /** @description A per-item rule: how many items, which matched, and the one traced (the first matched, else the first). */
            items?: Record<string, never>;
            errors?: string[];
            /** @description The condition's value on the traced item. */
            value?: unknown;
            steps?: {
                expression: string;
                at: number;
                value: unknown;
            }[];
            steps_left_off?: number;
            cost?: {
                nodes?: number;
            };
            trace_error?: string;
        };
        /**
         * prunewarden input document v1
         * @description A request to one guard, selected by check. Scores must also lie within the policy's spec.scores range, ids must be unique, and cycles must increase; those rules depend on the policy and are checked after this schema.
         */
        "input.v1": {
            /**
             * @description Which guard to ask.
             * @enum {unknown}
             */
            check: "collapse" | "eviction" | "staleness" | "transition";
        } & (unknown & unknown & unknown & unknown);
        "input.v1.collapse": {
            /** @constant */
            check: "collapse";
            /** @description Snapshots, oldest first. */
            history: components["schemas"]["input.v1.snapshot"][];
            /** @description Reference score per canary; defaults to the earliest snapshot's scores. */
            baseline?: components["schemas"]["input.v1.scores"];
            /** @description Copied into the decision's audit record; a server with several policies chooses by them (docs/fleet.md). */
            labels?: {
                [key: string]: string;
            };
        };
        "input.v1.eviction": {
            /** @constant */
            check: "eviction";
            segment: components["schemas"]["input.v1.segment"];
            score: components["schemas"]["input.v1.score"];
            /**
             * @description The score again with the window perturbed; null when not measured.
             * @default null
             */
            perturbed_score?: components["schemas"]["input.v1.score"] | null;
            /**
             * @description Every segment slated for eviction in the same pass.
             * @default []
             */
            eviction_candidates?: components["schemas"]["input.v1.ids"];
            /** @description Copied into the decision's audit record; a server with several policies chooses by them (docs/fleet.md). */
            labels?: {
                [key: string]: string;
            };
        };
        /** @description A stable identifier of an entry, segment or span. */
        "input.v1.id": string;
        "input.v1.ids": components["schemas"]["input.v1.id"][];
        /** @description A pruning pass (prunewarden plan): the window, a target, and optionally the collapse history and turn statistics for the gates. */
        "input.v1.plan": {
            /** @description Copied into every decision's audit record. */
            session_id?: string;
            /** @description Copied into every decision's audit record. */
            labels?: {
                [key: string]: string;
            };
            segments: components["schemas"]["input.v1.window_segment"][];
            /** @description Evict the lowest-scored authorized segments until at least this many tokens are freed. */
            free_tokens?: number;
            /** @description Evict the lowest-scored authorized segments until at most this many segments remain. */
            keep_top_k?: number;
            /** @description Collapse snapshots, oldest first; the collapse gate runs on them when given. */
            history?: components["schemas"]["input.v1.snapshot"][];
            /** @description Canary baselines for the collapse gate. */
            baseline?: components["schemas"]["input.v1.scores"];
            turn?: components["schemas"]["input.v1.turn_stats"];
            turns?: components["schemas"]["input.v1.turn"][];
            /** @default [] */
            tombstones?: components["schemas"]["input.v1.ids"];
            recompute_budget?: number;
        } & (unknown | unknown);
        /** @description A relevance score within the policy's spec.scores range. */
        "input.v1.score": number;
        /** @description Entry id to relevance score. */
        "input.v1.scores": {
            [key: string]: components["schemas"]["input.v1.score"];
        };
        "input.v1.segment": {
            id: components["schemas"]["input.v1.id"];
            /** @description What the segment is: constraint, definition, negation, turn, summary, ... */
            kind: string;
            /**
             * @description The segment's text; used by rules, never logged.
             * @default
             */
            text?: string;
            /**
             * @description Flagged as impossible to reconstruct from retained context.
             * @default false
             */
            non_recoverable?: boolean;
            /**
             * @description Segments the score was judged against.
             * @default []
             */
            score_dependencies?: components["schemas"]["input.v1.ids"];
            /**
             * @description Whether a tombstone records this eviction.
             * @default false
             */
            tombstone_written?: boolean;
            /** @description Token count of the segment. */
            tokens?: number;
            /** @description Free-form facts about the segment for custom rules (segment.metadata); never read by the built-in guards. */
            metadata?: Record<string, never>;
        };
        /** @description The live entries' scores after one rewrite cycle. */
        "input.v1.snapshot": {
            /** @description Rewrite cycle number; strictly increasing along the history. */
            cycle: number;
            scores: components["schemas"]["input.v1.scores"];
            /**
             * @description Ids of pinned entries (canaries) in this cycle.
             * @default []
             */
            pinned?: components["schemas"]["input.v1.ids"];
        };
        "input.v1.span": {
            span_id: components["schemas"]["input.v1.id"];
            /** @description The span's current text. */
            text: string;
            /** @description The relevance score; null when absent. */
            score: components["schemas"]["input.v1.score"] | null;
            /** @description Lower-case hex SHA-256 of the UTF-8 text the score was computed against; empty when unbound. */
            text_sha256: string;
            /**
             * @description Rewrites since the last recompute.
             * @default 0
             */
            rewrite_count?: number;
            /**
             * @description Ids of the spans this one was rewritten from.
             * @default []
             */
            derived_from?: components["schemas"]["input.v1.ids"];
        };
        "input.v1.staleness": {
            /** @constant */
            check: "staleness";
            spans: components["schemas"]["input.v1.span"][];
            keep_top_k: number;
            /** @description What the latest rewrite reported. */
            turn?: components["schemas"]["input.v1.turn_stats"];
            /** @description Per-turn mean relevance and token count, oldest first. */
            turns?: components["schemas"]["input.v1.turn"][];
            /**
             * @description Ids evicted with a tombstone.
             * @default []
             */
            tombstones?: components["schemas"]["input.v1.ids"];
            /** @description Most spans that may be recomputed; beyond it pruning freezes. */
            recompute_budget?: number;
            /** @description Copied into the decision's audit record; a server with several policies chooses by them (docs/fleet.md). */
            labels?: {
                [key: string]: string;
            };
        };
        /** @description An edit of the window made by any code, judged from the window before it and after it: the edit is derived by content (SHA-256 of each segment's text), never taken from ids alone. */
        "input.v1.transition": {
            /** @constant */
            check: "transition";
            /** @description The window before the edit, in order; ids unique. */
            before: components["schemas"]["input.v1.transition_segment"][];
            /** @description The window after the edit, in order; ids unique. */
            after: components["schemas"]["input.v1.transition_segment"][];
            /**
             * @description Ids of before whose removal a tombstone records (besides tombstone segments in after).
             * @default []
             */
            tombstones?: components["schemas"]["input.v1.ids"];
            /** @description What made the edit (langchain.trim_messages, an agent's compaction step, ...); recorded, and read by rules. */
            applied_by?: string;
            /** @description Copied into the decision's audit record. */
            session_id?: string;
            /** @description Copied into the decision's audit record. */
            labels?: {
                [key: string]: string;
            };
            /** @description What the editor said it changed; compared with what was derived. */
            reported?: {
                spans_modified: number;
                scores_invalidated: number;
            };
            /**
             * @description Ids of canaries: pinned, removable only with a tombstone.
             * @default []
             */
            canaries?: components["schemas"]["input.v1.ids"];
        };
        /** @description One segment of a window before or after an edit (check transition): a window_segment whose score is optional, and a tombstone may name the removed ids it records. */
        "input.v1.transition_segment": {
            id: components["schemas"]["input.v1.id"];
            /** @description What the segment is: constraint, definition, negation, turn, summary, ... */
            kind: string;
            /**
             * @description The segment's text; used by rules, never logged.
             * @default
             */
            text?: string;
            /**
             * @description Token count; what a free_tokens target adds up.
             * @default 0
             */
            tokens?: number;
            /**
             * @description The relevance score, when the segment carries one; null or absent when it does not.
             * @default null
             */
            score?: components["schemas"]["input.v1.score"] | null;
            /**
             * @description The score again with the window perturbed; null when not measured.
             * @default null
             */
            perturbed_score?: components["schemas"]["input.v1.score"] | null;
            /**
             * @description Segments the score was judged against.
             * @default []
             */
            score_dependencies?: components["schemas"]["input.v1.ids"];
            /**
             * @description Flagged as impossible to reconstruct from retained context.
             * @default false
             */
            non_recoverable?: boolean;
            /**
             * @description Whether a tombstone records this eviction.
             * @default false
             */
            tombstone_written?: boolean;
            /** @description Free-form facts about the segment for custom rules (segment.metadata); never read by the built-in guards. */
            metadata?: Record<string, never>;
            /**
             * @description SHA-256 of the UTF-8 text the score was computed against; empty or absent when unbound (the staleness gate then refuses).
             * @default
             */
            text_sha256?: string;
            /**
             * @description Rewrites since the last recompute.
             * @default 0
             */
            rewrite_count?: number;
            /**
             * @description Ids of the segments this one was rewritten from.
             * @default []
             */
            derived_from?: components["schemas"]["input.v1.ids"];
            /** @description An eviction group: segments sharing a group id are planned, authorized and evicted together (a tool call and its result), or not at all. */
            group?: components["schemas"]["input.v1.id"];
            /** @description On a segment of kind tombstone in after: the ids of before it records as removed (each must be an id of before). */
            tombstone_for?: components["schemas"]["input.v1.ids"];
        };
        "input.v1.turn": {
            turn: number;
            mean_relevance: components["schemas"]["input.v1.score"];
            tokens: number;
        };
        "input.v1.turn_stats": {
            spans_modified: number;
            scores_invalidated: number;
        };
        /** @description One segment of the window a pruning pass plans over: what the eviction guard needs, plus the score binding the staleness guard checks. */
        "input.v1.window_segment": {
            id: components["schemas"]["input.v1.id"];
            /** @description What the segment is: constraint, definition, negation, turn, summary, ... */
            kind: string;
            /**
             * @description The segment's text; used by rules, never logged.
             * @default
             */
            text?: string;
            /**
             * @description Token count; what a free_tokens target adds up.
             * @default 0
             */
            tokens?: number;
            score: components["schemas"]["input.v1.score"];
            /**
             * @description The score again with the window perturbed; null when not measured.
             * @default null
             */
            perturbed_score?: components["schemas"]["input.v1.score"] | null;
            /**
             * @description Segments the score was judged against.
             * @default []
             */
            score_dependencies?: components["schemas"]["input.v1.ids"];
            /**
             * @description Flagged as impossible to reconstruct from retained context.
             * @default false
             */
            non_recoverable?: boolean;
            /**
             * @description Whether a tombstone records this eviction.
             * @default false
             */
            tombstone_written?: boolean;
            /** @description Free-form facts about the segment for custom rules (segment.metadata); never read by the built-in guards. */
            metadata?: Record<string, never>;
            /**
             * @description SHA-256 of the UTF-8 text the score was computed against; empty or absent when unbound (the staleness gate then refuses).
             * @default
             */
            text_sha256?: string;
            /**
             * @description Rewrites since the last recompute.
             * @default 0
             */
            rewrite_count?: number;
            /**
             * @description Ids of the segments this one was rewritten from.
             * @default []
             */
            derived_from?: components["schemas"]["input.v1.ids"];
            /** @description An eviction group: segments sharing a group id are planned, authorized and evicted together (a tool call and its result), or not at all. */
            group?: components["schemas"]["input.v1.id"];
        };
        /**
         * prunewarden session state v4
         * @description A snapshot of one Session (Session.state()): everything it keeps between calls, so that Engine.session(id, state=...) or a SessionStore can restore it after a restart. Scores are raw (as observed); beyond this schema, they must lie within the restoring policy's spec.scores range, and cycles and turns must increase. See docs/sessions.md.
         */
        "session-state.v4": {
            /**
             * @description Version of this format. Always 4: a reader refuses any other, and names versions 1 to 3 (written before the first release) as no longer read.
             * @constant
             */
            state_version: 4;
            session_id: string | null;
            /** @description The labels every record of the session carries. */
            labels: {
                [key: string]: string;
            };
            /** @description On a server with several policies (serve --tenants), the tenant the session is bound to: a call whose labels choose another tenant is refused, never rebound (docs/fleet.md). Absent: bound to none; the tenant that next opens it binds it. */
            tenant?: string;
            /** @description The policy the state was kept under (its windows sized what was kept). */
            policy: {
                name: string;
                version: string;
                digest: string;
            };
            /** @description Rewrite cycles observed over the session's whole life (only the last few are kept). */
            cycles_seen: number;
            /** @description The last consecutive_cycles + 1 cycles, oldest first. */
            snapshots: components["schemas"]["input.v1.snapshot"][];
            /** @description Each canary's score when it was first seen pinned, kept for the session's whole life. */
            baseline: {
                [key: string]: number;
            };
            /** @description The spreads of the session's first cycles: what a relative spread floor is relative to, or the cusum spread test's reference (its first_cycles judgeable cycles plus consecutive_cycles). */
            early_spreads: {
                /** @description The calibration the spreads were measured on (spec.scores.calibration); null: raw scores. */
                scale: null | {
                    /** @constant */
                    scale: "fixed";
                    low: number;
                    high: number;
                };
                values: number[];
            };
            /** @description The last drift_consecutive_turns + 1 turns, oldest first. */
            turns: components["schemas"]["input.v1.turn"][];
            /** @description The segments custom rules pinned (effect pin) in pruning passes, each bound to the SHA-256 of the text that was pinned: such a segment stays pinned while its text is unchanged and the session keeps this policy. See docs/sessions.md. */
            rule_pins: {
                /** @description The digest of the policy whose rules pinned them (null: none pinned yet). */
                policy: string | null;
                /** @description Segment id -> SHA-256 of its pinned text (UTF-8). */
                segments: {
                    [key: string]: string;
                };
            };
            /** @description The enforced collapse halt in force: every eviction, prune and plan is refused with pruning_halted until a later cycle passes the collapse guard. null: pruning is not halted. */
            halt: null | {
                decision_id: string;
                /** @description The primary reason of the halting collapse decision. */
                code: string;
                cycle: number | null;
                /** @description Digest of the policy that halted. */
                policy: string;
            };
            /** @description The cusum spread test's sum S and run (spread_floor_mode: cusum), valid under the settings basis names; null basis and an empty run without it. */
            cusum: {
                /** @description Digest of the cusum settings, consecutive_cycles, min_live_entries and score calibration the sum was accumulated under. */
                basis: string | null;
                /** @description S after the last judged cycle (natural-log units). */
                sum: number;
                /** @description Optional: the tracking reference (cusum reference.mode: tracking) once the early reference is complete. Absent: the reference is the early one, recomputed from early_spreads. */
                reference?: {
                    /** @description ln of the reference the next judged cycle is compared with. */
                    log_reference: number;
                    /** @description How many judged cycles that added no evidence have moved it. */
                    updates: number;
                };
                /** @description The last (at most consecutive_cycles) judged cycles since a cycle with too few entries reset the run, oldest first. */
                run: {
                    cycle: number;
                    log_reference: number;
                    reference_cycles: number;
                    log_ratio: number;
                    increment: number;
                }[];
            };
            /** @description The ids the session has seen pinned in a transition's before (a pinned kind or non_recoverable), oldest first: they stay pinned by id in later transitions, whatever kind or non_recoverable the segment then claims (docs/transitions.md#sessions-halts-and-pins). */
            seen_pinned: string[];
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    health: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Up */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Health"];
                };
            };
        };
    };
    readiness: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ready */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Readiness"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    schema: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The schema */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": unknown;
                };
            };
            /** @description No such session */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    policy: {
        parameters: {
            query?: never;
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The policy */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PolicyInForce"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    policies: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The tenants */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Policies"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    status: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The server's status */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Status"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    evaluate: {
        parameters: {
            query?: {
                /** @description Recorded with the decision; a halted session of this id refuses the call */
                session_id?: string;
                /** @description true: each refusing reason of a guard carries detail.would_allow (and would_allow_text) and each decision an explanation with a trace of every rule, as `prunewarden explain` (docs/explain.md); any other value than true or false is a 400 */
                explain?: boolean;
            };
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path?: never;
            cookie?: never;
        };
        /** @description An input.v1 document */
        requestBody: {
            content: {
                "application/json": components["schemas"]["InputDocument"];
            };
        };
        responses: {
            /** @description The decision (logged) */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Decision"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body did not arrive within the body deadline; the connection is closed */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body is larger than the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    plan: {
        parameters: {
            query?: {
                /** @description true: each refusing reason of a guard carries detail.would_allow (and would_allow_text) and each decision an explanation with a trace of every rule, as `prunewarden explain` (docs/explain.md); any other value than true or false is a 400 */
                explain?: boolean;
            };
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path?: never;
            cookie?: never;
        };
        /** @description A plan document */
        requestBody: {
            content: {
                "application/json": components["schemas"]["PlanDocument"];
            };
        };
        responses: {
            /** @description The plan (every decision logged) */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Plan"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body did not arrive within the body deadline; the connection is closed */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body is larger than the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    observe_cycle: {
        parameters: {
            query?: {
                /** @description true: each refusing reason of a guard carries detail.would_allow (and would_allow_text) and each decision an explanation with a trace of every rule, as `prunewarden explain` (docs/explain.md); any other value than true or false is a 400 */
                explain?: boolean;
            };
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path: {
                /** @description The session's id, chosen by the caller (one path segment: no '/'); its percent-escapes must decode to UTF-8 (else 400) */
                session_id: string;
            };
            cookie?: never;
        };
        /** @description One cycle: `{cycle, scores, pinned}` */
        requestBody: {
            content: {
                "application/json": components["schemas"]["Snapshot"];
            };
        };
        responses: {
            /** @description The decision (or acknowledgement), logged */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Decision"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body did not arrive within the body deadline; the connection is closed */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request conflicts with the session's state: a cycle or turn out of order, a stored state this policy cannot use, the session busy on another replica, a stored state that fails its integrity check (`session-state-rejected`: DELETE clears it), or labels choosing another tenant than the session's (`tenant-conflict`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body is larger than the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    observe_turn: {
        parameters: {
            query?: never;
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path: {
                /** @description The session's id, chosen by the caller (one path segment: no '/'); its percent-escapes must decode to UTF-8 (else 400) */
                session_id: string;
            };
            cookie?: never;
        };
        /** @description One turn: `{turn, mean_relevance, tokens}` */
        requestBody: {
            content: {
                "application/json": components["schemas"]["Turn"];
            };
        };
        responses: {
            /** @description The decision (or acknowledgement), logged */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TurnObserved"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body did not arrive within the body deadline; the connection is closed */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request conflicts with the session's state: a cycle or turn out of order, a stored state this policy cannot use, the session busy on another replica, a stored state that fails its integrity check (`session-state-rejected`: DELETE clears it), or labels choosing another tenant than the session's (`tenant-conflict`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body is larger than the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    authorize: {
        parameters: {
            query?: {
                /** @description true: each refusing reason of a guard carries detail.would_allow (and would_allow_text) and each decision an explanation with a trace of every rule, as `prunewarden explain` (docs/explain.md); any other value than true or false is a 400 */
                explain?: boolean;
            };
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path: {
                /** @description The session's id, chosen by the caller (one path segment: no '/'); its percent-escapes must decode to UTF-8 (else 400) */
                session_id: string;
            };
            cookie?: never;
        };
        /** @description An eviction document without `labels` */
        requestBody: {
            content: {
                "application/json": components["schemas"]["EvictionDocument"];
            };
        };
        responses: {
            /** @description The decision (or acknowledgement), logged */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Decision"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body did not arrive within the body deadline; the connection is closed */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request conflicts with the session's state: a cycle or turn out of order, a stored state this policy cannot use, the session busy on another replica, a stored state that fails its integrity check (`session-state-rejected`: DELETE clears it), or labels choosing another tenant than the session's (`tenant-conflict`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body is larger than the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    prune: {
        parameters: {
            query?: {
                /** @description true: each refusing reason of a guard carries detail.would_allow (and would_allow_text) and each decision an explanation with a trace of every rule, as `prunewarden explain` (docs/explain.md); any other value than true or false is a 400 */
                explain?: boolean;
            };
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path: {
                /** @description The session's id, chosen by the caller (one path segment: no '/'); its percent-escapes must decode to UTF-8 (else 400) */
                session_id: string;
            };
            cookie?: never;
        };
        /** @description A staleness document without `turns` and `labels` */
        requestBody: {
            content: {
                "application/json": components["schemas"]["StalenessDocument"];
            };
        };
        responses: {
            /** @description The decision (or acknowledgement), logged */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Decision"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body did not arrive within the body deadline; the connection is closed */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request conflicts with the session's state: a cycle or turn out of order, a stored state this policy cannot use, the session busy on another replica, a stored state that fails its integrity check (`session-state-rejected`: DELETE clears it), or labels choosing another tenant than the session's (`tenant-conflict`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body is larger than the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    plan_session: {
        parameters: {
            query?: {
                /** @description true: each refusing reason of a guard carries detail.would_allow (and would_allow_text) and each decision an explanation with a trace of every rule, as `prunewarden explain` (docs/explain.md); any other value than true or false is a 400 */
                explain?: boolean;
            };
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path: {
                /** @description The session's id, chosen by the caller (one path segment: no '/'); its percent-escapes must decode to UTF-8 (else 400) */
                session_id: string;
            };
            cookie?: never;
        };
        /** @description A plan document without `history`, `baseline`, `turns`, `session_id`, `labels` */
        requestBody: {
            content: {
                "application/json": components["schemas"]["PlanDocument"];
            };
        };
        responses: {
            /** @description The decision (or acknowledgement), logged */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Plan"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body did not arrive within the body deadline; the connection is closed */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request conflicts with the session's state: a cycle or turn out of order, a stored state this policy cannot use, the session busy on another replica, a stored state that fails its integrity check (`session-state-rejected`: DELETE clears it), or labels choosing another tenant than the session's (`tenant-conflict`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body is larger than the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    verify: {
        parameters: {
            query?: {
                /** @description true: each refusing reason of a guard carries detail.would_allow (and would_allow_text) and each decision an explanation with a trace of every rule, as `prunewarden explain` (docs/explain.md); any other value than true or false is a 400 */
                explain?: boolean;
            };
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path: {
                /** @description The session's id, chosen by the caller (one path segment: no '/'); its percent-escapes must decode to UTF-8 (else 400) */
                session_id: string;
            };
            cookie?: never;
        };
        /** @description A transition document without `session_id` and `labels` */
        requestBody: {
            content: {
                "application/json": components["schemas"]["TransitionDocument"];
            };
        };
        responses: {
            /** @description The decision (or acknowledgement), logged */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Decision"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body did not arrive within the body deadline; the connection is closed */
            408: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request conflicts with the session's state: a cycle or turn out of order, a stored state this policy cannot use, the session busy on another replica, a stored state that fails its integrity check (`session-state-rejected`: DELETE clears it), or labels choosing another tenant than the session's (`tenant-conflict`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The body is larger than the limit */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    state: {
        parameters: {
            query?: never;
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path: {
                /** @description The session's id, chosen by the caller (one path segment: no '/'); its percent-escapes must decode to UTF-8 (else 400) */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The state */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionState"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No such session */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request conflicts with the session's state: a cycle or turn out of order, a stored state this policy cannot use, the session busy on another replica, a stored state that fails its integrity check (`session-state-rejected`: DELETE clears it), or labels choosing another tenant than the session's (`tenant-conflict`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
    delete_session: {
        parameters: {
            query?: never;
            header?: {
                /** @description The request's labels, `name=value` pairs separated by commas; with the document's `labels` they choose the tenant whose policy decides (docs/fleet.md). A label given here and in the document with two values is a 400; on a session, labels choosing another tenant than the session's are a 409 `tenant-conflict` */
                "Prunewarden-Labels"?: string;
            };
            path: {
                /** @description The session's id, chosen by the caller (one path segment: no '/'); its percent-escapes must decode to UTF-8 (else 400) */
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Done */
            200: {
                headers: {
                    /** @description The policy the answer was decided (or read) under: `name@version sha256:...` */
                    "Prunewarden-Policy"?: string;
                    /** @description How many decisions the answer carries (when it carries any) */
                    "Prunewarden-Decision-Count"?: number;
                    /** @description Their ids, comma-separated, when there are at most 64; a larger answer (a pass over many segments) lists them only in its body, each decision with its `decision_id` */
                    "Prunewarden-Decision-Ids"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionDeleted"];
                };
            };
            /** @description The body is not valid: every problem, located (`<request>:LINE:COL: $.path: ...`) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description No valid bearer token */
            401: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request's bearer token is a tenant's (the tenants file's `tokens`) and its labels choose another tenant, or it chooses a tenant that lists tokens without presenting one of them, or a tenant's token on a route showing every tenant (`forbidden-tenant`) */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The request conflicts with the session's state: a cycle or turn out of order, a stored state this policy cannot use, the session busy on another replica, a stored state that fails its integrity check (`session-state-rejected`: DELETE clears it), or labels choosing another tenant than the session's (`tenant-conflict`) */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
            /** @description The decision could not be logged (fail closed), the session store cannot be reached or the change could not be saved (it is not made: retry), the request ran out of time, the server is not ready, or it is at one of its limits (`server-busy`: connections, bodies being read, live sessions; retry) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/problem+json": components["schemas"]["Problem"];
                };
            };
        };
    };
}
