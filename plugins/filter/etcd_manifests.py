"""The filters that build a cluster's Kubernetes objects.

Names only: the functions, and the reasons for each decision, are in
etcd_runbook/rules/etcd_manifests.py."""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.etcd_manifests import (
    bootstrap_claims,
    bootstrap_started,
    cert_profiles,
    claim_records,
    disruption_budget,
    doomed_pods,
    initial_cluster_entry,
    member_claim,
    member_pod,
    member_pods,
    out_of_date,
    peer_url,
    pod_settle_marks,
    pod_voter_labels,
    recovery_objects,
    replace_objects,
    services,
    tls_restored_ca,
    tls_secrets,
)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "etcd_member_claim": member_claim,
            "etcd_member_pod": member_pod,
            "etcd_member_pods": member_pods,
            "etcd_claim_records": claim_records,
            "etcd_pod_voter_labels": pod_voter_labels,
            "etcd_pod_settle_marks": pod_settle_marks,
            "etcd_services": services,
            "etcd_disruption_budget": disruption_budget,
            "etcd_peer_url": peer_url,
            "etcd_bootstrap_claims": bootstrap_claims,
            "etcd_bootstrap_started": bootstrap_started,
            "etcd_initial_cluster_entry": initial_cluster_entry,
            "etcd_cert_profiles": cert_profiles,
            "etcd_tls_secrets": tls_secrets,
            "etcd_tls_restored_ca": tls_restored_ca,
            "etcd_replace_objects": replace_objects,
            "etcd_out_of_date": out_of_date,
            "etcd_doomed_pods": doomed_pods,
            "etcd_recovery_objects": recovery_objects,
        }
