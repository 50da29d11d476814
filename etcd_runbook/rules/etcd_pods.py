"""What the kubelet and the scheduler say of a member Pod, read alike by the plan (which
halts a roll or refuses a step on it) and by the look's waits (which stop waiting on it).

Pure functions of a Pod as the API server returns it; nothing here reads a cluster."""

from __future__ import annotations

from datetime import datetime
from typing import Any

# What the kubelet says of a container that cannot start: its image cannot be had...
IMAGE_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")


# ...or it cannot be made or keeps failing.
START_FAILURES = (
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
)


def seconds_between(earlier: str, later: str) -> float | None:
    """Seconds from one RFC 3339 UTC time to another; None when either is missing or bad."""
    try:
        start = datetime.fromisoformat(earlier.replace("Z", "+00:00"))
        end = datetime.fromisoformat(later.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None
    return (end - start).total_seconds()


def unschedulable(pod: dict[str, Any]) -> str:
    """The scheduler's word on a Pod it found no node for (PodScheduled False, Unschedulable),
    or '' when it was placed or has not been tried yet."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if (c.get("type"), c.get("status"), c.get("reason")) == (
            "PodScheduled",
            "False",
            "Unschedulable",
        ):
            return str(c.get("message") or "no node fits it").strip()
    return ""


def etcd_status(pod: dict[str, Any]) -> dict[str, Any]:
    """The etcd container's status; {} before the kubelet reports one."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == "etcd":
            return dict(status)
    return {}


def container_spec(pod: dict[str, Any]) -> dict[str, Any]:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == "etcd":
            return dict(container)
    return {}


def last_words(message: Any) -> str:
    """The last line a failed container left (with FallbackToLogsOnError, its log's tail),
    kept short: status is no log."""
    lines = [line.strip() for line in str(message or "").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def ended_why(ended: dict[str, Any], restarts: int) -> tuple[str, str]:
    """(cause, why) of a container that ended: killed for memory, or exited with an error."""
    again = f", {restarts} restart{'s' if restarts != 1 else ''}" if restarts else ""
    if ended.get("reason") == "OOMKilled":
        return "memory", f"etcd was killed for want of memory (OOMKilled{again})"
    words = last_words(ended.get("message"))
    return "crash", (
        f"etcd exited ({ended.get('reason') or 'Error'}, exit code {ended.get('exitCode')}"
        f"{again}){': ' + words if words else ''}"
    )


def container_trouble(pod: dict[str, Any]) -> dict[str, str]:
    """Why the Pod's etcd container cannot run, as the kubelet says it now: its image cannot
    be pulled, the container cannot be made, or it failed (killed for memory, or exited with
    an error) and waits to be started again. {cause (image, memory, crash), reason, why}; {}
    while it runs or is being started."""
    status = etcd_status(pod)
    state = status.get("state") or {}
    waiting = state.get("waiting") or {}
    reason = str(waiting.get("reason") or "")
    restarts = int(status.get("restartCount") or 0)
    if reason in IMAGE_FAILURES:
        words = last_words(waiting.get("message"))
        image = container_spec(pod).get("image") or status.get("image")
        return {
            "cause": "image",
            "reason": reason,
            "why": f"its image {image} cannot be pulled ({reason}{': ' + words if words else ''})",
        }
    ended = state.get("terminated") or {}
    if reason in START_FAILURES:
        ended = ended or (status.get("lastState") or {}).get("terminated") or {}
        if not ended:
            words = last_words(waiting.get("message"))
            return {
                "cause": "crash",
                "reason": reason,
                "why": f"its container cannot start ({reason}{': ' + words if words else ''})",
            }
    elif not ended or ended.get("exitCode", 0) == 0:
        return {}
    cause, why = ended_why(ended, restarts)
    return {"cause": cause, "reason": reason or str(ended.get("reason") or "Error"), "why": why}


def restart_trouble(pod: dict[str, Any]) -> dict[str, str]:
    """Why a member Pod made by a roll is not to be trusted yet though it runs now: its
    container restarted (killed for memory, or exited) since the Pod was made; {} if never."""
    status = etcd_status(pod)
    restarts = int(status.get("restartCount") or 0)
    if not restarts:
        return {}
    ended = (status.get("lastState") or {}).get("terminated") or {}
    cause, why = ended_why(ended, restarts)
    return {"cause": cause, "reason": str(ended.get("reason") or "Restarted"), "why": why}


def healthy_run(pod: dict[str, Any]) -> str:
    """Which run of the member's container is Ready: its start and its Ready transition, as
    the kubelet wrote them; '' while the Pod is not Ready or the container not running."""
    running = (etcd_status(pod).get("state") or {}).get("running") or {}
    ready = next(
        (
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == "Ready" and c.get("status") == "True"
        ),
        None,
    )
    if ready is None or not running:
        return ""
    return f"{running.get('startedAt') or ''}/{ready.get('lastTransitionTime') or ''}"
