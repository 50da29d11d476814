"""Documentation of the options of the modules that look at what an operator-side runbook
decides on and name the operator's own image (etcd_runbook/observe/etcd_backup_observe.py
own_pod_argument_spec, and api_timeout_argument_spec as the fragment etcd_own_pod.timeout:
the cluster look takes own_pod without it)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  own_pod:
    description: A Pod whose container image to return (the operator's own, which the Jobs run too).
    type: dict
    suboptions:
      namespace:
        description: The Pod's namespace.
        type: str
        required: true
      name:
        description: The Pod's name.
        type: str
        required: true
      container:
        description: The container; the first one when it has no container of this name.
        type: str
        default: manager
"""

    TIMEOUT = r"""
options:
  timeout:
    description: Seconds each API request may take.
    type: float
    default: 30
"""
