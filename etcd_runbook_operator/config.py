"""watches.yaml parsed into a validated, typed configuration.

Keys follow operator-sdk's Ansible operator so runbooks stay portable; a few keys of our own
(documented in docs/operator.md) carry what that operator hard-codes or gets from elsewhere.
An unknown key is a startup error naming the key, the file and the entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """watches.yaml is not valid; the message names the file, entry and key."""


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Dependent:
    """A kind whose objects belong to the watched objects: its changes queue the owner, and
    with preempt_on_loss a deletion by someone else stops the owner's run in flight.

    selector: the label selector of its informer; None takes the entry's dependentSelector
    ("" watches every object of the kind). owner_field: the path (split at the dots) of a
    string field naming the owner in the same namespace, for objects that people make
    themselves and so carry neither an ownerReference nor the owner label."""

    group: str
    version: str
    kind: str
    plural: str
    preempt_on_loss: bool = False
    selector: str | None = None
    owner_field: tuple[str, ...] = ()


def parse_duration(value: object, where: str) -> float:
    """Go-style duration ("60s", "1m30s", "1h") or a bare number of seconds."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a duration, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and value and _DURATION_PART.sub("", value) == "":
        seconds = sum(
            float(num) * _UNIT_SECONDS[unit] for num, unit in _DURATION_PART.findall(value)
        )
    else:
        raise ConfigError(f"{where}: invalid duration {value!r} (e.g. 60s, 1m30s, 1h)")
    if seconds < 0:
        raise ConfigError(f"{where}: duration must not be negative")
    return seconds


@dataclass(frozen=True)
class Target:
    """What to run: exactly one of a playbook path or a role (name or path)."""

    playbook: Path | None = None
    role: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Finalizer:
    name: str
    target: Target


@dataclass(frozen=True)
class Watch:
    group: str
    version: str
    kind: str
    target: Target
    reconcile_period: float = 60.0
    finalizer: Finalizer | None = None
    manage_status: bool = True
    watch_dependent_resources: bool = True
    selector: str = ""
    max_runner_artifacts: int = 20
    snake_case_parameters: bool = True
    pass_spec_parameters: bool = True
    # Own keys (not in operator-sdk): see docs/operator.md.
    dependents: tuple[Dependent, ...] = ()
    dependent_selector: str = ""
    owner_label: str = ""
    preemption_opt_out_annotation: str = ""
    full_run_interval: float = 600.0
    fingerprint_annotations: tuple[str, ...] = ()
    # Seconds a node's kubelet may leave its Lease unrenewed before the owners of the Pods on
    # that node are run (0: off).
    node_silence: float = 0.0

    def __post_init__(self) -> None:
        # By default the annotations of our own API group are the ones that matter.
        if not self.fingerprint_annotations:
            object.__setattr__(self, "fingerprint_annotations", (f"{self.group}/",))
        if not self.preemption_opt_out_annotation:
            object.__setattr__(
                self, "preemption_opt_out_annotation", f"{self.group}/deleted-by-runbook"
            )

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def selector_of(self, dependent: Dependent) -> str:
        """The label selector of a dependent's informer: its own, else the entry's."""
        return self.dependent_selector if dependent.selector is None else dependent.selector

    @property
    def object_var_name(self) -> str:
        """operator-sdk's name for the whole object: `_<group>_<kind>`, dots/dashes as `_`."""
        group = re.sub(r"[.-]", "_", self.group)
        return f"_{group}_{self.kind.lower()}"


_TARGET_KEYS = {"playbook", "role", "vars"}
_DEPENDENT_KEYS = {"group", "version", "kind", "plural", "preemptOnLoss", "selector", "ownerField"}
# Field names joined by dots (spec.clusterName); no list indexes: an owner is named once.
_FIELD_PATH = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
_FINALIZER_KEYS = {"name"} | _TARGET_KEYS
_WATCH_KEYS = {
    "group",
    "version",
    "kind",
    "playbook",
    "role",
    "vars",
    "reconcilePeriod",
    "finalizer",
    "manageStatus",
    "watchDependentResources",
    "selector",
    "maxRunnerArtifacts",
    "snakeCaseParameters",
    "passSpecParameters",
    "dependents",
    "dependentSelector",
    "ownerLabel",
    "preemptionOptOutAnnotation",
    "fullRunInterval",
    "fingerprintAnnotations",
    "nodeSilence",
}


def _check_keys(data: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}"
            + (f" (and {', '.join(map(repr, unknown[1:]))})" if unknown[1:] else "")
            + f"; allowed: {', '.join(sorted(allowed))}"
        )


def _typed(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ConfigError(f"{where}: {key!r} must be a {name}, got {value!r}")
    return value


def _target(data: dict[str, Any], base: Path, where: str, required: bool) -> Target | None:
    playbook = data.get("playbook")
    role = data.get("role")
    vars_ = data.get("vars", {}) or {}
    if not isinstance(vars_, dict):
        raise ConfigError(f"{where}: 'vars' must be a mapping")
    if playbook is not None and role is not None:
        raise ConfigError(f"{where}: give either 'playbook' or 'role', not both")
    if playbook is None and role is None:
        if required:
            raise ConfigError(f"{where}: one of 'playbook' or 'role' is required")
        return None
    if playbook is not None:
        path = (base / _typed(data, "playbook", str, where)).resolve()
        if not path.is_file():
            raise ConfigError(f"{where}: playbook {str(path)!r} does not exist")
        return Target(playbook=path, vars=vars_)
    role_name = _typed(data, "role", str, where)
    # A role given as a path is relative to the watches file; a bare name is found on roles_path.
    if "/" in role_name:
        role_path = (base / role_name).resolve()
        if not role_path.is_dir():
            raise ConfigError(f"{where}: role directory {str(role_path)!r} does not exist")
        role_name = str(role_path)
    return Target(role=role_name, vars=vars_)


def _label_selector(value: Any, where: str) -> str:
    """Kubernetes LabelSelector (matchLabels/matchExpressions) -> the string form of the API."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: 'selector' must be a mapping")
    _check_keys(value, {"matchLabels", "matchExpressions"}, f"{where}: selector")
    labels = value.get("matchLabels") or {}
    # Label values are strings to the API: an unquoted `true` or `1` would not match "true".
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ConfigError(f"{where}: selector 'matchLabels' must map strings to strings")
    parts = [f"{k}={v}" for k, v in sorted(labels.items())]
    expressions = value.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise ConfigError(f"{where}: selector 'matchExpressions' must be a list")
    for expr in expressions:
        if not isinstance(expr, dict):
            raise ConfigError(f"{where}: invalid selector expression {expr!r}")
        _check_keys(expr, {"key", "operator", "values"}, f"{where}: selector expression")
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if not isinstance(key, str) or not isinstance(values, list):
            raise ConfigError(f"{where}: invalid selector expression {expr!r}")
        if op in ("In", "NotIn") and values:
            parts.append(f"{key} {op.lower()} ({','.join(map(str, values))})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
        else:
            raise ConfigError(f"{where}: invalid selector expression {expr!r}")
    return ",".join(parts)


def _dependent(data: Any, where: str) -> Dependent:
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping")
    _check_keys(data, _DEPENDENT_KEYS, where)
    for key in ("version", "kind"):
        if key not in data:
            raise ConfigError(f"{where}: {key!r} is required")
    kind = _typed(data, "kind", str, where)
    owner_field: tuple[str, ...] = ()
    if "ownerField" in data:
        path = _typed(data, "ownerField", str, where)
        if not _FIELD_PATH.fullmatch(path):
            raise ConfigError(
                f"{where}: 'ownerField' must be a dotted path of field names "
                f"(e.g. spec.clusterName), got {path!r}"
            )
        owner_field = tuple(path.split("."))
    return Dependent(
        group=_typed(data, "group", str, where) if "group" in data else "",
        version=_typed(data, "version", str, where),
        kind=kind,
        plural=_typed(data, "plural", str, where) if "plural" in data else kind.lower() + "s",
        preempt_on_loss=_typed(data, "preemptOnLoss", bool, where)
        if "preemptOnLoss" in data
        else False,
        selector=_label_selector(data["selector"], where) if "selector" in data else None,
        owner_field=owner_field,
    )


def _watch(data: Any, base: Path, where: str) -> Watch:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: each entry must be a mapping")
    _check_keys(data, _WATCH_KEYS, where)
    for key in ("group", "version", "kind"):
        if key not in data:
            raise ConfigError(f"{where}: {key!r} is required")
        _typed(data, key, str, where)
    where = f"{where} ({data['kind']})"
    target = _target(data, base, where, required=True)
    assert target is not None
    kwargs: dict[str, Any] = {}
    if "reconcilePeriod" in data:
        kwargs["reconcile_period"] = parse_duration(
            data["reconcilePeriod"], f"{where}: reconcilePeriod"
        )
    period = kwargs.get("reconcile_period", 60.0)
    kwargs["full_run_interval"] = (
        parse_duration(data["fullRunInterval"], f"{where}: fullRunInterval")
        if "fullRunInterval" in data
        else 10 * period
    )
    if "nodeSilence" in data:
        kwargs["node_silence"] = parse_duration(data["nodeSilence"], f"{where}: nodeSilence")
    if "finalizer" in data:
        fin = data["finalizer"]
        fwhere = f"{where}: finalizer"
        if not isinstance(fin, dict):
            raise ConfigError(f"{fwhere} must be a mapping")
        _check_keys(fin, _FINALIZER_KEYS, fwhere)
        if "name" not in fin:
            raise ConfigError(f"{fwhere}: 'name' is required")
        fin_target = _target(fin, base, fwhere, required=False)
        # As in operator-sdk: a finalizer with only vars runs the main target with those vars.
        if fin_target is None:
            fin_target = Target(
                playbook=target.playbook, role=target.role, vars=fin.get("vars") or {}
            )
        kwargs["finalizer"] = Finalizer(name=_typed(fin, "name", str, fwhere), target=fin_target)
    for key, attr in (
        ("manageStatus", "manage_status"),
        ("watchDependentResources", "watch_dependent_resources"),
        ("snakeCaseParameters", "snake_case_parameters"),
        ("passSpecParameters", "pass_spec_parameters"),
    ):
        if key in data:
            kwargs[attr] = _typed(data, key, bool, where)
    if "maxRunnerArtifacts" in data:
        kwargs["max_runner_artifacts"] = _typed(data, "maxRunnerArtifacts", int, where)
        if kwargs["max_runner_artifacts"] < 1:
            raise ConfigError(f"{where}: 'maxRunnerArtifacts' must be >= 1")
    if "selector" in data:
        kwargs["selector"] = _label_selector(data["selector"], where)
    for key, attr in (
        ("dependentSelector", "dependent_selector"),
        ("ownerLabel", "owner_label"),
        ("preemptionOptOutAnnotation", "preemption_opt_out_annotation"),
    ):
        if key in data:
            kwargs[attr] = _typed(data, key, str, where)
    if "dependents" in data:
        kwargs["dependents"] = tuple(
            _dependent(d, f"{where}: dependents[{i}]")
            for i, d in enumerate(_typed(data, "dependents", list, where))
        )
        # One informer per dependent kind and namespace: a kind listed twice would be watched
        # twice and each of its objects counted twice among its owner's dependents.
        listed: set[tuple[str, str]] = set()
        for i, dep in enumerate(kwargs["dependents"]):
            if (dep.group, dep.kind) in listed:
                raise ConfigError(
                    f"{where}: dependents[{i}]: {dep.kind}"
                    f"{'.' + dep.group if dep.group else ''} is listed twice"
                )
            listed.add((dep.group, dep.kind))
    if kwargs.get("node_silence") and not any(
        (d.group, d.kind) == ("", "Pod") for d in kwargs.get("dependents", ())
    ):
        raise ConfigError(f"{where}: nodeSilence needs Pods among the dependents (whose nodes)")
    if "fingerprintAnnotations" in data:
        values = _typed(data, "fingerprintAnnotations", list, where)
        if not all(isinstance(v, str) for v in values):
            raise ConfigError(f"{where}: 'fingerprintAnnotations' must be a list of strings")
        kwargs["fingerprint_annotations"] = tuple(values)
    return Watch(
        group=data["group"], version=data["version"], kind=data["kind"], target=target, **kwargs
    )


def load_watches(path: Path) -> list[Watch]:
    """Parse and validate a watches file; relative paths are relative to the file."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{path}: expected a non-empty list of watches")
    base = path.resolve().parent
    watches = [_watch(entry, base, f"{path}: entry {i}") for i, entry in enumerate(data)]
    seen: set[tuple[str, str]] = set()
    for w in watches:
        if (w.group, w.kind) in seen:
            raise ConfigError(f"{path}: {w.kind}.{w.group} is watched twice")
        seen.add((w.group, w.kind))
    return watches
