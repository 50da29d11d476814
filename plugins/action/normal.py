"""The default action for modules, with this project's own modules run in the task's worker.

Ansible runs every module in a new Python process: it packs the module and its module_utils
into a zip (AnsiballZ), starts an interpreter, imports `ansible.module_utils.basic` and the
module's libraries, and only then does the module's work. For a module that makes one API
call that start-up is most of its cost (about 0.3 s a task here, against 0.02 s for a
set_fact), and a runbook makes several such calls on the way to its first change.

So a module of this project (a file in ansible.cfg's `library` directories) runs inside the
task's worker process instead: the worker is already a fresh fork of ansible-playbook, made
for this one task and gone after it, so the module still cannot leave state behind. Only the
transport changes; the module sees the same arguments (the `_ansible_*` ones included, so
check mode, diff and no_log behave alike), and its output goes through the same parsing,
result cleaning and failure handling as a module run in its own process. Handlers the module
registers with `atexit` (its private files) run when it ends, as they would at its exit.

Anything else runs as ansible-core's own `normal` action does: modules of other origins, a
connection other than `local`, become, async, a task `environment`, a Python interpreter other
than the one running ansible-playbook, and runs with `etcd_modules_in_worker: false` (for
comparing, or ruling this path out).

This file overrides ansible-core's `normal` action plugin through ansible.cfg's
`action_plugins`, the way Ansible documents for a local default action.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import io
import json
import os
import runpy
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from ansible import constants as C
from ansible.module_utils._internal._ansiballz import _loader as _ansiballz_loader
from ansible.module_utils.common.json import Direction, get_module_encoder
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins import action as action_plugins
from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash
from ansible.vars.clean import remove_internal_keys


def _builtin_normal() -> type:
    """ansible-core's own `normal` action, loaded from its file under a name of its own: this
    file holds its Python name, ansible.plugins.action.normal (and ansible.builtin's alias)."""
    path = os.path.join(os.path.dirname(action_plugins.__file__), "normal.py")
    spec = importlib.util.spec_from_file_location("etcd_runbook_builtin_normal", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ActionModule


NormalAction: Any = _builtin_normal()

# The serialization profile ansible-core gives every Python module without METADATA.
PROFILE = "legacy"
SWITCH = "etcd_modules_in_worker"


def in_library(path: str, libraries: list[str]) -> bool:
    """Whether the module file at `path` lies in one of the configured library directories."""
    real = os.path.realpath(path)
    return path.endswith(".py") and any(
        os.path.dirname(real) == os.path.realpath(os.path.expanduser(d)) for d in libraries
    )


@contextlib.contextmanager
def exit_handlers_run_at_end() -> Iterator[None]:
    """Collects what the module registers with atexit and runs it when the block ends: the
    worker leaves through os._exit, which runs no atexit handler."""
    registered: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []
    original = atexit.register

    def register(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
        registered.append((fn, args, kwargs))
        return fn

    atexit.register = register  # type: ignore[assignment]
    try:
        yield
    finally:
        atexit.register = original
        for fn, args, kwargs in reversed(registered):
            with contextlib.suppress(Exception):
                fn(*args, **kwargs)


@contextlib.contextmanager
def captured_output() -> Iterator[dict[str, str]]:
    """What the module writes to stdout and stderr, through Python or straight to the file
    descriptors (a C library such as gRPC's writes to fd 2), in the order it was written, as
    the pipes of a module process would hold it."""
    out: dict[str, str] = {}
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    files = {fd: tempfile.TemporaryFile() for fd in (1, 2)}  # noqa: SIM115  # closed below
    streams = sys.stdout, sys.stderr
    try:
        for fd, handle in files.items():
            os.dup2(handle.fileno(), fd)
        sys.stdout, sys.stderr = (
            io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), write_through=True) for fd in (1, 2)
        )
        yield out
    finally:
        sys.stdout, sys.stderr = streams
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            files[fd].seek(0)
            out[name] = files[fd].read().decode(errors="replace")
            files[fd].close()


def run_module(path: str, args: dict[str, Any], module_utils: list[str]) -> dict[str, Any]:
    """Runs the module file at `path` in this process as the AnsiballZ wrapper runs it in a
    process of its own: arguments through `ansible.module_utils.basic`, the file as __main__,
    an exception turned into ansible-core's own failure result. Returns rc, stdout, stderr."""
    import ansible.module_utils
    from ansible.module_utils import basic

    # Ansible packs a module's imports from configured module_utils directories into its zip;
    # here they join the package's path instead. (This project's modules import etcd_runbook,
    # an installed package, and need none: this keeps any module in `library` working alike.)
    for directory in module_utils:
        directory = os.path.expanduser(directory)
        if os.path.isdir(directory) and directory not in ansible.module_utils.__path__:
            ansible.module_utils.__path__.append(directory)
    encoder = get_module_encoder(PROFILE, Direction.CONTROLLER_TO_MODULE)
    basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args}, cls=encoder).encode()
    basic._ANSIBLE_PROFILE = PROFILE
    rc = 0
    argv = sys.argv
    with captured_output() as output:
        sys.argv = [path]
        try:
            with exit_handlers_run_at_end():
                try:
                    runpy.run_path(path, run_name="__main__")
                    raise RuntimeError("New-style module did not handle its own exit.")
                except Exception as error:  # a module ends with SystemExit; anything else:
                    # the wrapper's own handler prints the failure result and exits 1.
                    _ansiballz_loader._handle_exception(error, PROFILE)
        except SystemExit as done:
            rc = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        finally:
            sys.argv = argv
    return {"rc": rc, **output}


class ActionModule(NormalAction):
    def _module_in_worker(self, task_vars: dict[str, Any]) -> str | None:
        """The path of the task's module when it may run in this worker, else None."""
        if not boolean(self._templar.template(task_vars.get(SWITCH, True)), strict=False):
            return None
        if (
            self._connection.transport != "local"
            or self._play_context.become
            or self._task.async_val
            or self._compute_environment_string()
        ):
            return None
        interpreter = self._templar.template(task_vars.get("ansible_python_interpreter", ""))
        if interpreter != sys.executable:
            return None
        found = self._shared_loader_obj.module_loader.find_plugin_with_context(
            self._task.action, collection_list=self._task.collections
        )
        path = found.plugin_resolved_path if found.resolved else None
        return path if path and in_library(path, list(C.DEFAULT_MODULE_PATH)) else None

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        path = self._module_in_worker(task_vars)
        if path is None:
            return dict(super().run(tmp, task_vars))
        # The checks every action makes (check mode supported, and so on).
        result = ActionBase.run(self, tmp, task_vars)
        module_args = self._task.args
        self._update_module_args(self._task.action, module_args, task_vars)
        self._used_interpreter = sys.executable
        res = run_module(path, module_args, list(C.DEFAULT_MODULE_UTILS_PATH))
        data = self._parse_returned_data(res, PROFILE)
        remove_internal_keys(data)
        return dict(merge_hash(result, data))
