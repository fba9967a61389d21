"""Metrics the application reports through the sidecar's ``POST /v1/events``.

Accuracy and pass rates are exposed as counter pairs so the rules can take a
ratio of rates over any window; every label value is drawn from an allow-list
in the config (anything else is counted as ``other``).
"""

from __future__ import annotations

from infersight.catalog import Metric

# The request phases that happen in the gateway, before and after vLLM sees the request.
GATEWAY_PHASES: tuple[str, ...] = ("preprocessing", "allocation", "postprocessing")
TOKEN_TYPES: tuple[str, ...] = ("prompt", "completion")
COMPLIANCE_RESULTS: tuple[str, ...] = ("pass", "fail")
OTHER = "other"

# Gateway: phase timings, requests and tokens by SLO tier.
GATEWAY_PHASE_DURATION = Metric(
    "infersight_gateway_phase_duration_seconds",
    "histogram",
    "Time a request spent in a gateway phase (preprocessing, allocation, postprocessing with audit logging).",
    ("phase", "tier"),
)
GATEWAY_REQUESTS = Metric("infersight_gateway_requests_total", "counter", "Requests the gateway reported.", ("tier",))
GATEWAY_TOKENS = Metric(
    "infersight_gateway_tokens_total", "counter", "Prompt and completion tokens the gateway reported.", ("tier", "type")
)

# Domain token accuracy and compliance checks.
DOMAIN_TOKENS = Metric(
    "infersight_business_domain_tokens_total", "counter", "Domain tokens checked by the application.", ("domain",)
)
DOMAIN_TOKENS_CORRECT = Metric(
    "infersight_business_domain_tokens_correct_total",
    "counter",
    "Domain tokens the application's check found correct.",
    ("domain",),
)
COMPLIANCE_CHECKS = Metric(
    "infersight_business_compliance_checks_total",
    "counter",
    "Compliance checks by rule and result (pass, fail).",
    ("rule", "result"),
)

# Cost attribution: token shares by tenant and by product (the rules turn shares into dollars).
COST_TENANT_TOKENS = Metric(
    "infersight_cost_tenant_tokens_total", "counter", "Tokens attributed to a tenant.", ("tenant",)
)
COST_PRODUCT_TOKENS = Metric(
    "infersight_cost_product_tokens_total", "counter", "Tokens attributed to a product.", ("product",)
)

# Ingest health.
EVENTS = Metric("infersight_business_events_total", "counter", "Events accepted, by kind.", ("kind",))
EVENTS_REJECTED = Metric(
    "infersight_business_events_rejected_total",
    "counter",
    "Events rejected, by reason; an unreadable body counts as one.",
    ("reason",),
)
LABELS_FOLDED = Metric(
    "infersight_business_label_values_folded_total",
    "counter",
    "Label values outside the configured allow-list, counted as 'other' (extend the allow-list if this grows).",
    ("label",),
)
