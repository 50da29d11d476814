"""Errors of the etcd client layer, worded for the person who runs the playbook.

Every failure the modules can meet (bad input, an endpoint that does not answer, a TLS or
auth problem, etcd refusing a request, a safety refusal of our own) is one `EtcdModuleError`;
a module catches that class in exactly one place and turns it into `fail_json`. The `reason`
is a short CamelCase word that roles can copy into a Kubernetes condition reason.
"""

from __future__ import annotations

from typing import Any


class EtcdModuleError(Exception):
    """A failure explained in `message`; `reason` is a short machine-readable word."""

    reason = "EtcdError"

    def __init__(self, message: str, *, endpoint: str | None = None, reason: str | None = None):
        super().__init__(message)
        self.message = message
        self.endpoint = endpoint
        if reason is not None:
            self.reason = reason

    def as_result(self) -> dict[str, Any]:
        """Keyword arguments for `fail_json`."""
        result: dict[str, Any] = {"msg": self.message, "reason": self.reason}
        if self.endpoint:
            result["endpoint"] = self.endpoint
        return result


class EtcdInputError(EtcdModuleError):
    """The module's arguments are wrong; nothing was sent to etcd."""

    reason = "InvalidInput"


class EtcdRefusedError(EtcdModuleError):
    """A safety rule of ours forbids the change; nothing was sent to etcd."""

    reason = "Refused"


class EtcdQuorumRefusedError(EtcdRefusedError):
    """Refused because too few voting members answer healthy on this look: unlike the other
    refusals, a later look may allow the change."""


class EtcdUnreachableError(EtcdModuleError):
    """The endpoint could not be talked to at all (connection, DNS, TLS handshake)."""

    reason = "Unreachable"


class EtcdTimeoutError(EtcdModuleError):
    """The endpoint did not answer within the deadline."""

    reason = "Timeout"


class EtcdAuthError(EtcdModuleError):
    """Authentication failed or the user lacks a permission."""

    reason = "AuthFailed"


class EtcdForeignClusterError(EtcdModuleError):
    """An endpoint answered for another cluster than the expected one (a stranger on a
    member's address, a fork); its answer was not used."""

    reason = "ForeignCluster"


class EtcdServerError(EtcdModuleError):
    """etcd answered with an error; `etcd_message` is etcd's own text."""

    def __init__(
        self, message: str, *, etcd_message: str, endpoint: str | None = None, reason: str
    ):
        super().__init__(message, endpoint=endpoint, reason=reason)
        self.etcd_message = etcd_message


# etcd's error texts (server/etcdserver/api/v3rpc/rpctypes) that membership and maintenance
# meet, with the reason word and an explanation of what to do.
KNOWN_ETCD_ERRORS: dict[str, tuple[str, str]] = {
    "etcdserver: too many learner members in cluster": (
        "TooManyLearners",
        "etcd allows one learner at a time: promote or remove the existing learner first",
    ),
    "etcdserver: can only promote a learner member which is in sync with leader": (
        "LearnerNotReady",
        "the learner has not caught up with the leader's log yet (etcd needs 90% of it); "
        "wait until it has, then promote again",
    ),
    "etcdserver: can only promote a learner member": (
        "NotALearner",
        "the member is not a learner, so there is nothing to promote",
    ),
    "etcdserver: Peer URLs already exists": (
        "PeerURLExists",
        "another member already uses this peer URL",
    ),
    "etcdserver: member ID already exist": ("MemberExists", "the member ID is already in use"),
    "etcdserver: re-configuration failed due to not enough started members": (
        "NotEnoughStartedMembers",
        "etcd refused the membership change because too few members are started and "
        "connected for the cluster to keep quorum after it; start the missing members first",
    ),
    "etcdserver: unhealthy cluster": (
        "UnhealthyCluster",
        "etcd refused the membership change because the cluster is not healthy (a member "
        "is down or not connected to the leader)",
    ),
    "etcdserver: member not found": ("MemberNotFound", "no member has this ID"),
    "etcdserver: given member URLs are invalid": (
        "InvalidURL",
        "etcd rejected the member URLs as invalid",
    ),
    "etcdserver: no leader": (
        "NoLeader",
        "the cluster has no leader: quorum is probably lost",
    ),
    "etcdserver: not leader": (
        "NotLeader",
        "the request must be sent to the leader's endpoint",
    ),
    "etcdserver: bad leader transferee": (
        "BadLeaderTransferee",
        "the chosen member cannot become leader (it is a learner, unknown, or not connected)",
    ),
    "etcdserver: leader changed": ("LeaderChanged", "the leader changed during the request"),
    "etcdserver: server stopped": (
        "ServerStopped",
        "the member stopped while answering (it may have just been removed)",
    ),
    "etcdserver: rpc not supported for learner": (
        "LearnerEndpoint",
        "a learner cannot serve this request; use a voting member's endpoint",
    ),
    "etcdserver: mvcc: database space exceeded": (
        "NoSpace",
        "the database reached its quota (NOSPACE alarm): compact, defragment, then disarm",
    ),
    "etcdserver: mvcc: required revision has been compacted": (
        "Compacted",
        "the revision is already compacted",
    ),
    "etcdserver: mvcc: required revision is a future revision": (
        "FutureRevision",
        "the revision is newer than the cluster's current revision",
    ),
    "etcdserver: authentication failed, invalid user ID or password": (
        "AuthFailed",
        "etcd rejected the user name or password",
    ),
    "etcdserver: user name is empty": (
        "AuthRequired",
        "the cluster has authentication enabled: give user and password",
    ),
    "etcdserver: user name not found": (
        "AuthFailed",
        "etcd has no such user (with client certificate auth and no user/password, the "
        "certificate's common name is taken as the user name)",
    ),
    "etcdserver: invalid auth token": (
        "InvalidToken",
        "this member does not know the auth token (it may have restarted or still be "
        "catching up with the log)",
    ),
    "etcdserver: permission denied": (
        "PermissionDenied",
        "the user lacks the permission (membership and maintenance calls need the root role)",
    ),
    "etcdserver: corrupt cluster": ("Corrupt", "etcd reports data corruption (CORRUPT alarm)"),
}

_AUTH_REASONS = {"AuthFailed", "AuthRequired", "InvalidToken", "PermissionDenied"}
_TLS_HINTS = ("handshake", "ssl", "certificate", "tls", "x509", "wrong_version_number")


def _unreachable_explanation(details: str, endpoint: str) -> tuple[str, str]:
    """Reason and explanation for a failure to talk to `endpoint` at all."""
    lowered = details.lower()
    if any(hint in lowered for hint in _TLS_HINTS):
        if endpoint.startswith("https://"):
            why = (
                "the TLS handshake failed: the server certificate is not signed by ca_cert, "
                "does not name this host, or the server wants a client certificate "
                "(client_cert/client_key)"
            )
        else:
            why = "the TLS handshake failed"
        return "TLSError", why
    if "connection refused" in lowered:
        return "Unreachable", "connection refused (nothing listens there, or it is down)"
    if "dns" in lowered or "name resolution" in lowered or "resolve" in lowered:
        return "Unreachable", "the host name does not resolve"
    if "socket closed" in lowered or "connection reset" in lowered or "eof" in lowered:
        hint = (
            " (if the server uses TLS, use an https:// endpoint and ca_cert)"
            if endpoint.startswith("http://")
            else ""
        )
        return "Unreachable", f"the server closed the connection{hint}"
    return "Unreachable", "cannot connect"


def _rpc_error_of(exc: BaseException) -> Any:
    """The gRPC error behind `exc` (etcd3aio wraps some codes in its own classes). Found by
    shape, so this module imports without grpc and can explain that it is missing."""
    seen: BaseException | None = exc
    while seen is not None:
        if callable(getattr(seen, "code", None)) and callable(getattr(seen, "details", None)):
            return seen
        seen = seen.__cause__
    return None


def is_etcd_message(details: str) -> bool:
    """True when the text comes from etcd itself, i.e. the server was reached."""
    return details.startswith(("etcdserver:", "mvcc:", "auth:"))


def translate(
    exc: BaseException, *, endpoint: str, operation: str, timeout: float | None
) -> EtcdModuleError:
    """Turn an exception from etcd3aio/gRPC/asyncio into an explained `EtcdModuleError`."""
    if isinstance(exc, EtcdModuleError):
        return exc
    if isinstance(exc, TimeoutError):
        return EtcdTimeoutError(
            f"{operation} at {endpoint} timed out after {timeout}s", endpoint=endpoint
        )
    rpc = _rpc_error_of(exc)
    if rpc is None:
        return EtcdModuleError(f"{operation} at {endpoint} failed: {exc}", endpoint=endpoint)
    code = rpc.code().name
    details = (rpc.details() or "").strip()
    if is_etcd_message(details):
        # Some calls (HashKV, Snapshot) pass the auth store's error through unconverted:
        # "auth: invalid auth token" is etcdserver's "invalid auth token".
        known = KNOWN_ETCD_ERRORS.get(details) or KNOWN_ETCD_ERRORS.get(
            "etcdserver: " + details.removeprefix("auth: ")
        )
        if known is None:
            return EtcdServerError(
                f"{operation} at {endpoint} failed: etcd said '{details}'",
                etcd_message=details,
                endpoint=endpoint,
                reason="EtcdError",
            )
        reason, why = known
        message = f"{operation} at {endpoint} failed: {why} (etcd said '{details}')"
        if reason in _AUTH_REASONS:
            return EtcdAuthError(message, endpoint=endpoint, reason=reason)
        return EtcdServerError(message, etcd_message=details, endpoint=endpoint, reason=reason)
    if code == "DEADLINE_EXCEEDED":
        return EtcdTimeoutError(
            f"{operation} at {endpoint} timed out after {timeout}s (no answer in time)",
            endpoint=endpoint,
        )
    if code == "UNAVAILABLE":
        reason, why = _unreachable_explanation(details, endpoint)
        return EtcdUnreachableError(
            f"cannot reach etcd at {endpoint}: {why} [gRPC: {details}]",
            endpoint=endpoint,
            reason=reason,
        )
    if code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        return EtcdAuthError(
            f"{operation} at {endpoint} was rejected: {details or code}", endpoint=endpoint
        )
    if code == "UNIMPLEMENTED":
        return EtcdServerError(
            f"{operation} is not supported by the etcd server at {endpoint} (too old a "
            f"version?): {details}",
            etcd_message=details,
            endpoint=endpoint,
            reason="Unsupported",
        )
    return EtcdModuleError(
        f"{operation} at {endpoint} failed: {code}: {details}", endpoint=endpoint
    )
