// Names for the documents of API v1, from the generated src/openapi.ts: what a caller sends and
// what the server answers, as the bundled JSON Schemas describe them.

import type { components, operations, paths } from "./openapi.js";

type Schemas = components["schemas"];

export type { components, operations, paths };

/** A decision (decision.v1): what a guard decided, why, and under which exact policy. */
export type Decision = Schemas["Decision"];
export type Reason = Schemas["decision.v1.reason"];
export type Action = Schemas["decision.v1.action"];
/** The policy identity every answer names. */
export type PolicyIdentity = Decision["policy"];
/** What a pruning pass may do, with every decision. */
export type Plan = Schemas["Plan"];
export type PolicyInForce = Schemas["PolicyInForce"];
export type SessionState = Schemas["SessionState"];
export type SessionDeleted = Schemas["SessionDeleted"];
export type TurnObserved = Schemas["TurnObserved"];
export type Health = Schemas["Health"];
export type Readiness = Schemas["Readiness"];
/** `GET /v1/policies`: the tenants in the order their selectors are tried, and the default. */
export type Policies = Schemas["Policies"];
/** One tenant: its selector, the policy (and shadow) it holds, and its health. */
export type Tenant = Schemas["Tenant"];
/** `GET /v1/status`: every tenant, the bundle, decisions since start, log shipping. */
export type Status = Schemas["Status"];
/** An RFC 9457 problem document as the server writes it, with the located problems. */
export type Problem = Schemas["Problem"] & Record<string, unknown>;
/** One located problem: `<request>:LINE:COL: $.path: message`. */
export type LocatedProblem = NonNullable<Schemas["Problem"]["problems"]>[number];

export type InputDocument = Schemas["InputDocument"];
export type PlanDocument = Schemas["PlanDocument"];
export type EvictionDocument = Schemas["EvictionDocument"];
export type StalenessDocument = Schemas["StalenessDocument"];
export type TransitionDocument = Schemas["TransitionDocument"];
export type Snapshot = Schemas["Snapshot"];
export type Turn = Schemas["Turn"];
export type Segment = Schemas["input.v1.segment"];
export type Span = Schemas["input.v1.span"];
export type WindowSegment = Schemas["input.v1.window_segment"];
export type TransitionSegment = Schemas["input.v1.transition_segment"];
export type TurnStats = Schemas["input.v1.turn_stats"];
export type Scores = Schemas["input.v1.scores"];
