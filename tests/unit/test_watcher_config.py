from pathlib import Path

import pytest

from etcd_runbook_operator.config import ConfigError, load_watches, parse_duration

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "pb.yml").write_text("- hosts: localhost\n  tasks: []\n")
    path = tmp_path / "watches.yaml"
    path.write_text(text)
    return path


BASE = """
- group: test.runbook.io
  version: v1
  kind: Widget
  playbook: pb.yml
"""


def test_repo_watches_file_has_the_contracted_entry(tmp_path):
    # Load our watches.yaml against a stub playbook: it must not depend on the role's progress.
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "etcdcluster.yml").write_text("[]\n")
    (tmp_path / "playbooks" / "etcdbackup.yml").write_text("[]\n")
    (tmp_path / "playbooks" / "etcdrestore.yml").write_text("[]\n")
    copy = tmp_path / "watches.yaml"
    copy.write_text((REPO / "watches.yaml").read_text())
    w, backup, restore = load_watches(copy)
    assert (w.group, w.version, w.kind) == ("etcd.runbook.io", "v1alpha1", "EtcdCluster")
    assert w.target.playbook == (tmp_path / "playbooks" / "etcdcluster.yml").resolve()
    assert w.reconcile_period == 60.0
    assert w.max_runner_artifacts == 5
    assert w.finalizer is not None
    assert w.finalizer.name == "etcd.runbook.io/finalizer"
    assert w.finalizer.target.vars == {"state": "absent"}
    assert w.finalizer.target.playbook == w.target.playbook
    assert w.object_var_name == "_etcd_runbook_io_etcdcluster"
    assert w.full_run_interval == 600.0
    # What the watcher knows of etcd's runbook comes from here, not from its code.
    assert [(d.kind, d.plural, d.preempt_on_loss) for d in w.dependents] == [
        ("Pod", "pods", True),
        ("PersistentVolumeClaim", "persistentvolumeclaims", False),
        ("EtcdBackup", "etcdbackups", False),
    ]
    # Every EtcdBackup naming the cluster queues it, the user's too (unlabelled): no selector.
    assert [(w.selector_of(d), d.owner_field) for d in w.dependents] == [
        ("app.kubernetes.io/managed-by=etcd-runbook-operator", ()),
        ("app.kubernetes.io/managed-by=etcd-runbook-operator", ()),
        ("", ("spec", "clusterName")),
    ]
    assert w.owner_label == "etcd.runbook.io/cluster" and not w.pass_spec_parameters
    assert w.dependent_selector == "app.kubernetes.io/managed-by=etcd-runbook-operator"
    assert w.preemption_opt_out_annotation == "etcd.runbook.io/deleted-by-runbook"
    # An EtcdBackup owns Jobs and a CronJob (not Pods), found by its own label; no finalizer:
    # its objects go with it by ownerReference, its snapshots stay.
    assert (backup.kind, backup.object_var_name) == ("EtcdBackup", "_etcd_runbook_io_etcdbackup")
    assert [(d.group, d.kind, d.preempt_on_loss) for d in backup.dependents] == [
        ("batch", "Job", False),
        ("batch", "CronJob", False),
    ]
    assert backup.owner_label == "etcd.runbook.io/backup" and backup.finalizer is None
    assert backup.target.playbook == (tmp_path / "playbooks" / "etcdbackup.yml").resolve()
    # An EtcdRestore follows its Job and the EtcdCluster it creates (labelled until restored).
    assert [(d.group, d.kind) for d in restore.dependents] == [
        ("batch", "Job"),
        ("etcd.runbook.io", "EtcdCluster"),
    ]
    assert restore.owner_label == "etcd.runbook.io/restore" and restore.finalizer is None


def test_defaults_and_relative_paths(tmp_path):
    [w] = load_watches(write(tmp_path, BASE))
    assert w.target.playbook == tmp_path / "pb.yml"
    assert w.manage_status and w.watch_dependent_resources and w.snake_case_parameters
    # Nothing etcd-specific by default: watches.yaml names the dependents and the owner label.
    assert w.dependents == () and w.dependent_selector == "" and w.owner_label == ""
    assert w.preemption_opt_out_annotation == "test.runbook.io/deleted-by-runbook"
    assert w.fingerprint_annotations == ("test.runbook.io/",)


def test_unknown_key_names_key_file_and_entry(tmp_path):
    path = write(tmp_path, BASE + "  reconcilePeriods: 5s\n")
    with pytest.raises(ConfigError) as err:
        load_watches(path)
    msg = str(err.value)
    assert "'reconcilePeriods'" in msg and str(path) in msg and "entry 0" in msg


def test_unknown_key_in_finalizer(tmp_path):
    path = write(tmp_path, BASE + "  finalizer:\n    name: x/y\n    playbok: pb.yml\n")
    with pytest.raises(ConfigError, match="finalizer: unknown key 'playbok'"):
        load_watches(path)


def test_finalizer_with_only_vars_reuses_main_target(tmp_path):
    [w] = load_watches(
        write(tmp_path, BASE + "  finalizer:\n    name: x/y\n    vars: {state: absent}\n")
    )
    assert w.finalizer and w.finalizer.target.playbook == w.target.playbook
    assert w.finalizer.target.vars == {"state": "absent"}


@pytest.mark.parametrize(
    "extra, message",
    [
        ("  role: foo\n", "either 'playbook' or 'role'"),
        ("  reconcilePeriod: soon\n", "invalid duration"),
        ("  maxRunnerArtifacts: 0\n", ">= 1"),
        ("  manageStatus: 'yes'\n", "'manageStatus' must be a bool"),
        ("  dependents: [{kind: Job}]\n", r"dependents\[0\]: 'version' is required"),
        ("  dependents: [{version: v1, kind: Job, plurals: x}]\n", "unknown key 'plurals'"),
        ("  dependents: {version: v1}\n", "'dependents' must be a list"),
        (
            "  dependents: [{version: v1, kind: Pod}, {version: v2, kind: Pod}]\n",
            r"dependents\[1\]: Pod is listed twice",
        ),
        (
            "  dependents: [{group: a.io, version: v1, kind: X}, {group: a.io, version: v1,"
            " kind: X, plural: xes}]\n",
            r"dependents\[1\]: X.a.io is listed twice",
        ),
    ],
)
def test_invalid_values_are_named(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message):
        load_watches(write(tmp_path, BASE + extra))


DEP = "  dependents:\n    - version: v1\n      kind: Gadget\n"


@pytest.mark.parametrize(
    "extra, selector, owner_field",
    [
        ("", "managed=yes", ()),
        ("      ownerField: spec.owner\n", "managed=yes", ("spec", "owner")),
        (
            "      ownerField: spec.target.cluster_name\n",
            "managed=yes",
            ("spec", "target", "cluster_name"),
        ),
        ("      ownerField: ownerName\n", "managed=yes", ("ownerName",)),
        # An empty selector watches every object of the kind (as an empty LabelSelector does).
        ("      selector: {}\n      ownerField: spec.owner\n", "", ("spec", "owner")),
        ("      selector: {matchLabels: {}}\n", "", ()),
        ("      selector: {matchLabels: {tier: db}}\n", "tier=db", ()),
        (
            "      selector:\n        matchExpressions: [{key: x, operator: DoesNotExist}]\n",
            "!x",
            (),
        ),
    ],
)
def test_dependent_selector_and_owner_field(tmp_path, extra, selector, owner_field):
    text = BASE + DEP + extra + "  dependentSelector: managed=yes\n"
    [w] = load_watches(write(tmp_path, text))
    [dep] = w.dependents
    assert (w.selector_of(dep), dep.owner_field) == (selector, owner_field)


@pytest.mark.parametrize(
    "extra, message",
    [
        ("      ownerfield: spec.owner\n", r"dependents\[0\]: unknown key 'ownerfield'"),
        ("      ownerField: [spec, owner]\n", r"dependents\[0\]: 'ownerField' must be a str"),
        ("      ownerField: 3\n", "'ownerField' must be a str"),
        ("      ownerField: ''\n", "'ownerField' must be a dotted path"),
        ("      ownerField: spec..owner\n", "'ownerField' must be a dotted path"),
        ("      ownerField: .spec.owner\n", "'ownerField' must be a dotted path"),
        ("      ownerField: spec.owner.\n", "'ownerField' must be a dotted path"),
        ("      ownerField: 'spec.owners[0]'\n", "'ownerField' must be a dotted path"),
        ("      ownerField: metadata.labels.a/b\n", "'ownerField' must be a dotted path"),
        ("      ownerField: spec. owner\n", "'ownerField' must be a dotted path"),
        ("      selector: app=x\n", r"dependents\[0\]: 'selector' must be a mapping"),
        ("      selector:\n", r"dependents\[0\]: 'selector' must be a mapping"),
        ("      selector: {labels: {a: b}}\n", r"dependents\[0\]: selector: unknown key 'labels'"),
        ("      selector: {matchLabels: {tier: 1}}\n", "'matchLabels' must map strings"),
        ("      selector: {matchLabels: [a]}\n", "'matchLabels' must map strings"),
        ("      selector: {matchExpressions: {key: a}}\n", "'matchExpressions' must be a list"),
        ("      selector: {matchExpressions: [a]}\n", "invalid selector expression"),
        (
            "      selector: {matchExpressions: [{key: a, operator: In}]}\n",
            "invalid selector expression",
        ),
    ],
)
def test_invalid_dependent_keys_are_named(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_watches(write(tmp_path, BASE + DEP + extra))
    assert "entry 0 (Widget)" in str(err.value)


def test_missing_playbook_and_duplicate_kind(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_watches(write(tmp_path, BASE.replace("pb.yml", "nope.yml")))
    with pytest.raises(ConfigError, match="watched twice"):
        load_watches(write(tmp_path, BASE + BASE))


def test_selector_and_own_keys(tmp_path):
    text = BASE + (
        "  selector:\n    matchLabels: {tier: db}\n"
        "    matchExpressions:\n"
        "      - {key: env, operator: In, values: [a, b]}\n"
        "      - {key: x, operator: Exists}\n"
        "  fullRunInterval: 5m\n  reconcilePeriod: 1m30s\n  fingerprintAnnotations: [a/]\n"
    )
    [w] = load_watches(write(tmp_path, text))
    assert w.selector == "tier=db,env in (a,b),x"
    assert w.full_run_interval == 300.0 and w.reconcile_period == 90.0
    assert w.fingerprint_annotations == ("a/",)


def test_dependents(tmp_path):
    text = BASE + (
        "  dependents:\n"
        "    - {group: batch, version: v1, kind: CronJob}\n"
        "    - {version: v1, kind: Pod, plural: pods, preemptOnLoss: true}\n"
        "  ownerLabel: test.runbook.io/owner\n"
        "  preemptionOptOutAnnotation: test.runbook.io/mine\n"
    )
    [w] = load_watches(write(tmp_path, text))
    assert [(d.group, d.plural, d.preempt_on_loss) for d in w.dependents] == [
        ("batch", "cronjobs", False),
        ("", "pods", True),
    ]
    assert w.owner_label == "test.runbook.io/owner"
    assert w.preemption_opt_out_annotation == "test.runbook.io/mine"


def test_parse_duration():
    assert parse_duration("1h2m3s", "x") == 3723
    assert parse_duration(15, "x") == 15
    with pytest.raises(ConfigError):
        parse_duration("10 s", "x")
