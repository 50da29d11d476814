"""Documentation of the API server options shared by the modules that read or write
Kubernetes objects (etcd_runbook/clients/etcd_kube.py kube_argument_spec)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig.
      - Without it, credentials are found as kubernetes.core finds them
        (E(K8S_AUTH_KUBECONFIG), E(KUBECONFIG), C(~/.kube/config), then the Pod's
        ServiceAccount).
    type: path
  context:
    description: Kubeconfig context; the current one when omitted.
    type: str
"""
