#!/usr/bin/env python3
"""Entry point of the etcd runbook operator; the logic lives in etcd_runbook_operator/.

This file shares its name with the standard library's `operator` module, and a script's own
directory comes first on sys.path, so the first stdlib `import operator` (collections does one)
would load this file. Hence only `os` and `sys` (already loaded at interpreter start) are used
before the fix: take this directory off sys.path, load the real `operator` so it is cached in
sys.modules, and only then put the directory back, last, for the package.
"""

import os
import sys

_HERE = os.path.dirname(os.path.realpath(__file__))

if __name__ != "__main__":
    # Imported as `operator` because this directory is on sys.path (e.g. PYTHONPATH=.) before
    # anything loaded the real one: hand the importer the standard module instead.
    _saved_path = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _HERE]
    try:
        del sys.modules[__name__]
        _stdlib = __import__(__name__)
    finally:
        sys.path[:] = _saved_path
    sys.modules[__name__] = _stdlib
else:
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _HERE]
    import operator  # noqa: F401  (the standard module, now cached in sys.modules)

    sys.path.append(_HERE)
    from etcd_runbook_operator.main import main

    sys.exit(main())
