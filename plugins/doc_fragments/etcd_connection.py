"""Documentation of the connection options shared by every etcd module
(etcd_runbook/clients/etcd_common.py connection_argument_spec)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  endpoints:
    description:
      - Client URLs of etcd members, C(http://host:port) or C(https://host:port).
      - Cluster-wide calls go to the first one that answers; the modules also reach every
        member through the client URLs it advertises in the member list (see
        O(advertised_urls)).
    type: list
    elements: str
    required: true
  ca_cert:
    description:
      - PEM file of the CA that signed the etcd servers' certificates.
      - Needed for C(https://) endpoints unless the system trust store has that CA.
    type: path
  client_cert:
    description:
      - PEM client certificate for mutual TLS. Requires O(client_key).
    type: path
  client_key:
    description:
      - PEM private key of O(client_cert).
    type: path
  user:
    description:
      - etcd user name when the cluster has authentication enabled. Requires O(password).
      - Membership and maintenance calls need a user with the root role.
    type: str
  password:
    description:
      - Password of O(user).
    type: str
  timeout:
    description:
      - Seconds to wait for each call to etcd.
    type: float
    default: 10.0
  ca_cert_content:
    description:
      - The PEM of O(ca_cert) itself, for a caller that holds it in memory (from a Secret).
      - Mutually exclusive with O(ca_cert).
    type: str
  client_cert_content:
    description:
      - The PEM of O(client_cert) itself. Mutually exclusive with O(client_cert).
    type: str
  client_key_content:
    description:
      - The PEM of O(client_key) itself, never logged. Mutually exclusive with O(client_key).
      - Written to a file only the module's process can read, removed when it ends.
    type: str
  cluster_id:
    description:
      - The cluster ID (hex) the endpoints must belong to, as recorded when the cluster was
        created.
      - An endpoint that answers with another cluster ID (a member that forked off, or a
        stranger on a reused address) is never used, and its word never counts.
      - Unset, the cluster ID most members report is taken.
    type: str
  advertised_urls:
    description:
      - Also ask, through the client URLs they advertise, the members that none of
        O(endpoints) answered as.
      - Turn off when O(endpoints) already lists every member that can answer, as the
        runbooks do (every running member Pod). A member whose Pod is going away is then
        reported unhealthy at once instead of after O(timeout).
    type: bool
    default: true
  addresses:
    description:
      - Host names of O(endpoints) (or of members' client URLs) mapped to the IP address to
        connect to for each. TLS still checks the certificate against the host name.
      - The runbooks give each running member Pod's IP. A Pod made again is reachable before
        cluster DNS answers for its name, and DNS may keep saying the name does not exist for
        the time it caches that answer.
    type: dict
    default: {}
"""
