#!/usr/bin/env python3
"""Dynamic provisioner for the local cluster: PVCs of a StorageClass become directories here.

Level-triggered: every PVC or PV event (and a resync every 30 s) reconciles everything:

- a Pending claim of our StorageClass whose Pod was scheduled (WaitForFirstConsumer sets
  `volume.kubernetes.io/selected-node`) gets a `local` PV pre-bound to it, backed by
  VOLUMES/<pv-name>, with node affinity to the selected node; with the class parameter
  `reach: any`, affinity that every node satisfies instead (`kubernetes.io/os In [linux]`):
  every node's kubelet sees VOLUMES on this one machine, so the volume is one any node can
  mount, as a zonal cloud disk is within its zone;
- a Released PV of ours with reclaim policy Delete loses its directory, then the PV;
- a bound claim asking for more than its PV holds is grown (a directory has no size, so
  growing is bookkeeping: PV capacity, then the claim's status).

Usage: hostdir.py --kubeconfig FILE --volumes DIR [--provisioner NAME]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.utils import parse_quantity

SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONER_ANN = "volume.kubernetes.io/storage-provisioner"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
RESYNC_SECONDS = 30

Obj = dict[str, Any]
log = logging.getLogger("hostdir")


def _items(list_fn: Callable[..., Any]) -> list[Obj]:
    """A list call as plain JSON objects (field names as the API spells them)."""
    items: list[Obj] = json.loads(list_fn(_preload_content=False).data)["items"]
    return items


def _ann(obj: Obj) -> dict[str, str]:
    annotations: dict[str, str] = obj["metadata"].get("annotations") or {}
    return annotations


class Provisioner:
    def __init__(
        self, core: client.CoreV1Api, storage: client.StorageV1Api, name: str, volumes: Path
    ) -> None:
        self.core, self.storage, self.name, self.volumes = core, storage, name, volumes

    def reconcile(self) -> None:
        classes = {
            sc["metadata"]["name"]: sc
            for sc in _items(self.storage.list_storage_class)
            if sc.get("provisioner") == self.name
        }
        pvs = {pv["metadata"]["name"]: pv for pv in _items(self.core.list_persistent_volume)}
        for pvc in _items(self.core.list_persistent_volume_claim_for_all_namespaces):
            sc = classes.get(pvc["spec"].get("storageClassName") or "")
            if sc is None:
                continue
            phase, volume = pvc.get("status", {}).get("phase"), pvc["spec"].get("volumeName")
            if phase == "Pending" and not volume:
                self._provision(pvc, sc, pvs)
            elif phase == "Bound" and volume in pvs:
                self._grow(pvc, pvs[volume])
        for pv in pvs.values():
            if (
                _ann(pv).get(PROVISIONED_BY) == self.name
                and pv.get("status", {}).get("phase") == "Released"
                and pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete"
            ):
                self._delete(pv)

    def _provision(self, pvc: Obj, sc: Obj, pvs: dict[str, Obj]) -> None:
        meta, spec = pvc["metadata"], pvc["spec"]
        node = _ann(pvc).get(SELECTED_NODE)
        if node is None or _ann(pvc).get(PROVISIONER_ANN, self.name) != self.name:
            return
        pv_name = f"pvc-{meta['uid']}"
        if pv_name in pvs:
            return
        path = self.volumes / pv_name
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)  # pods of any user may write, as on a fresh disk
        affinity = (
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
            if (sc.get("parameters") or {}).get("reach") == "any"
            else {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
        )
        pv: Obj = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv_name, "annotations": {PROVISIONED_BY: self.name}},
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
                "storageClassName": sc["metadata"]["name"],
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
                "local": {"path": str(path)},
                "nodeAffinity": {
                    "required": {"nodeSelectorTerms": [{"matchExpressions": [affinity]}]}
                },
            },
        }
        try:
            self.core.create_persistent_volume(pv)  # type: ignore[arg-type]  # a dict is accepted
        except ApiException as exc:
            if exc.status != 409:
                raise
        log.info("provisioned %s for %s/%s at %s", pv_name, meta["namespace"], meta["name"], path)

    def _grow(self, pvc: Obj, pv: Obj) -> None:
        if _ann(pv).get(PROVISIONED_BY) != self.name:
            return
        want = pvc["spec"]["resources"]["requests"]["storage"]
        if parse_quantity(want) > parse_quantity(pv["spec"]["capacity"]["storage"]):
            body = {"spec": {"capacity": {"storage": want}}}
            self.core.patch_persistent_volume(pv["metadata"]["name"], body)
            log.info("grew %s to %s", pv["metadata"]["name"], want)
        have = (pvc.get("status", {}).get("capacity") or {}).get("storage", "0")
        if parse_quantity(want) > parse_quantity(have):
            meta = pvc["metadata"]
            body = {"status": {"capacity": {"storage": want}}}
            self.core.patch_namespaced_persistent_volume_claim_status(
                meta["name"], meta["namespace"], body
            )

    def _delete(self, pv: Obj) -> None:
        name = pv["metadata"]["name"]
        local = pv["spec"].get("local")
        path = Path(local["path"]) if local else None
        # Only ever remove what we created: a direct child of our volumes directory.
        if path is not None and path.parent == self.volumes and path.name == name:
            shutil.rmtree(path, ignore_errors=True)
        try:
            self.core.delete_persistent_volume(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
        log.info("deleted %s and %s", name, path)


def _watch(list_fn: Callable[..., Any], changed: threading.Event) -> None:
    """List then watch from that resourceVersion; every event wakes the reconcile loop."""
    while True:
        try:
            rv = list_fn().metadata.resource_version
            for _ in watch.Watch().stream(list_fn, resource_version=rv, timeout_seconds=300):
                changed.set()
        except Exception as exc:  # 410 Gone, API server restarts: list again
            log.debug("watch ended: %s", exc)
            time.sleep(1)
        changed.set()


def run(prov: Provisioner) -> None:
    changed = threading.Event()
    for fn in (
        prov.core.list_persistent_volume_claim_for_all_namespaces,
        prov.core.list_persistent_volume,
    ):
        threading.Thread(target=_watch, args=(fn, changed), daemon=True).start()
    changed.set()
    while True:
        changed.wait(RESYNC_SECONDS)
        changed.clear()
        try:
            prov.reconcile()
        except Exception:  # the API server restarting must not end the provisioner
            log.exception("reconcile failed; retrying")
            time.sleep(2)
            changed.set()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--volumes", required=True, type=Path)
    parser.add_argument("--provisioner", default="erop.local/hostdir")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config(args.kubeconfig)
    args.volumes.mkdir(parents=True, exist_ok=True)
    volumes = args.volumes.resolve()
    run(Provisioner(client.CoreV1Api(), client.StorageV1Api(), args.provisioner, volumes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
