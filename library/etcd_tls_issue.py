#!/usr/bin/python
"""Ansible module: issue an etcd cluster's CA and certificates in one process."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_tls_issue
short_description: Issue a CA and etcd's peer, server and client certificates in one process
description:
  - Creates a new self-signed ECDSA P-256 CA when O(ca) is empty, or loads the CA in O(ca),
    then issues an ECDSA P-256 key and certificate, signed by that CA, for each purpose in
    O(issue), as O(profiles) describes it.
  - A CA it creates has C(CA:TRUE) (path length 0) and key usage C(keyCertSign), C(cRLSign),
    C(digitalSignature), both critical. Each certificate has C(CA:FALSE), key usage
    C(digitalSignature), C(keyEncipherment), the extended key usages and subject alternative
    names of its profile, and starts five minutes in the past to allow for clock skew.
  - A CA given in O(ca) is checked first; the task fails when its key does not match its
    certificate, the certificate is not a CA, or it has expired.
  - Returns the material as kubernetes.io/tls Secret data (PEM; keys PKCS#8, unencrypted),
    ready for C(stringData). Nothing is written anywhere, so check mode issues the same way.
    RV(material) holds private keys; register it under C(no_log).
version_added: "0.2.0"
author: etcd runbook operator maintainers
options:
  ca:
    description:
      - An existing CA, as the data of its Secret. Empty or omitted, a new CA is created.
      - Only C(tls.key) is kept out of logs; the certificate is public, and is every issued
        certificate's C(ca.crt) in RV(material).
    type: dict
    suboptions:
      tls.crt:
        description: The CA certificate, PEM.
        type: str
      tls.key:
        description: The CA's private key, PEM, unencrypted.
        type: str
      ca.crt:
        description:
          - Ignored; accepted because the CA Secret's data holds it (the CA's own certificate
            again).
        type: str
  ca_common_name:
    description:
      - Common name of a new CA. Required when O(ca) is empty; ignored otherwise.
    type: str
  ca_days:
    description: Days a new CA is valid.
    type: int
    default: 3650
  cert_days:
    description: Days each issued certificate is valid.
    type: int
    default: 825
  profiles:
    description:
      - Purpose (for example V(server)) to certificate profile, as the C(etcd_cert_profiles)
        filter gives them. Each profile is a dict of C(common_name) (str), C(sans) (list of
        C(DNS:name) and C(IP:address) strings; may be empty) and C(usage) (list of
        V(serverAuth) and V(clientAuth)).
    type: dict
    required: true
  issue:
    description:
      - Purposes of O(profiles) to issue a certificate for. Default every purpose in
        O(profiles).
      - With a new CA, certificates issued before do not chain to it; issue every purpose.
    type: list
    elements: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Issue a new CA and the peer, server and client certificates
  etcd_tls_issue:
    ca_common_name: "etcd.prod etcd CA"
    profiles: "{{ plan | etcd_cert_profiles }}"
    issue: [peer, server, client]
  register: tls
  no_log: true

- name: Issue the missing client certificate from the CA in place
  etcd_tls_issue:
    ca: "{{ tls_data.ca }}"
    profiles:
      client:
        common_name: etcd-runbook-operator
        sans: []
        usage: [clientAuth]
    issue: [client]
  register: tls
  no_log: true
"""

RETURN = r"""
material:
  description:
    - Purpose to kubernetes.io/tls Secret data (keys C(tls.crt), C(tls.key) and C(ca.crt),
      PEM). Holds C(ca) only when a new CA was created; its C(ca.crt) is its own certificate.
  returned: success
  type: dict
  sample:
    ca:
      tls.crt: |
        -----BEGIN CERTIFICATE-----
        MIIBnDCCAUOgAwIBAgIUd1...
        -----END CERTIFICATE-----
      tls.key: |
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49...
        -----END PRIVATE KEY-----
      ca.crt: |
        -----BEGIN CERTIFICATE-----
        MIIBnDCCAUOgAwIBAgIUd1...
        -----END CERTIFICATE-----
    client:
      tls.crt: |
        -----BEGIN CERTIFICATE-----
        MIIBwzCCAWmgAwIBAgIUS3...
        -----END CERTIFICATE-----
      tls.key: |
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49...
        -----END PRIVATE KEY-----
      ca.crt: |
        -----BEGIN CERTIFICATE-----
        MIIBnDCCAUOgAwIBAgIUd1...
        -----END CERTIFICATE-----
new_ca:
  description: Whether a new CA was created.
  returned: success
  type: bool
  sample: true
issued:
  description:
    - The keys of RV(material) in the order issued, C(ca) first when a new CA was created.
  returned: success
  type: list
  elements: str
  sample: [ca, client]
msg:
  description: What was issued.
  returned: always
  type: str
  sample: issued ca, client
reason:
  description: A short word for the failure (V(InvalidTLSInput)).
  returned: failed
  type: str
  sample: InvalidTLSInput
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.clients.etcd_tls import issue_material


def argument_spec() -> dict[str, Any]:
    # Only the CA key is no_log: were the whole of `ca`, Ansible would mask its certificate
    # wherever it appears in the result, i.e. in every issued certificate's ca.crt.
    return {
        "ca": {
            "type": "dict",
            "options": {
                "tls.crt": {"type": "str"},
                "tls.key": {"type": "str", "no_log": True},
                "ca.crt": {"type": "str"},
            },
        },
        "ca_common_name": {"type": "str"},
        "ca_days": {"type": "int", "default": 3650},
        "cert_days": {"type": "int", "default": 825},
        "profiles": {"type": "dict", "required": True},
        "issue": {"type": "list", "elements": "str"},
    }


def run(params: dict[str, Any]) -> dict[str, Any]:
    made = issue_material(
        ca=params["ca"],
        ca_common_name=params["ca_common_name"],
        ca_days=params["ca_days"],
        cert_days=params["cert_days"],
        profiles=params["profiles"],
        issue=params["issue"],
    )
    return {
        "changed": bool(made.issued),
        "material": made.material,
        "new_ca": made.new_ca,
        "issued": made.issued,
        "msg": f"issued {', '.join(made.issued)}" if made.issued else "nothing to issue",
    }


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    try:
        result = run(module.params)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
