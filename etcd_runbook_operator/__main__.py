"""`python -m etcd_runbook_operator`: the same entry point as operator.py, without its dance
around the standard library's `operator` module."""

import sys

from etcd_runbook_operator.main import main

sys.exit(main())
