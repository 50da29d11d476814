# syntax=docker/dockerfile:1
# The operator image. hack/build-operator-image builds the same content without a docker engine
# (debootstrap + a chroot), which is what the local cluster runs; keep the two in step.
#
# The base is pinned by tag here because no registry is reachable where this was written; in a
# CI with registry access, pin it by digest too: python:3.11-slim-bookworm@sha256:<digest>.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY requirements.txt hack/images/operator-requirements.in hack/images/operator-collections.txt \
     hack/images/operator-prune-collections.py ./
# Runtime packages only (no linters or test tools), at the versions requirements.txt pins, and
# only the Ansible collections the runbooks use.
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-compile --only-binary=:all: -r operator-requirements.in \
      -c requirements.txt \
 && SITE="$(/opt/venv/bin/python -c 'import site; print(site.getsitepackages()[0])')" \
 && python operator-prune-collections.py "$SITE" operator-collections.txt \
 && /opt/venv/bin/python -m compileall -q -j 0 /opt/venv \
 && echo /opt/etcd-runbook-operator > "$SITE/etcd-runbook-operator.pth"

FROM ${PYTHON_IMAGE}
RUN groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --home-dir /tmp --shell /usr/sbin/nologin --no-create-home nonroot
COPY --from=builder /opt/venv /opt/venv
WORKDIR /opt/etcd-runbook-operator
# The same paths as hack/images/operator-files.txt.
COPY operator.py watches.yaml ansible.cfg ./
COPY etcd_runbook_operator/ etcd_runbook_operator/
COPY roles/ roles/
COPY playbooks/ playbooks/
COPY library/ library/
COPY etcd_runbook/ etcd_runbook/
COPY plugins/ plugins/
# Every task's worker process imports the filter plugins (and the modules it runs, and
# etcd_runbook under both) and PYTHONDONTWRITEBYTECODE is set: without bytecode shipped they are compiled
# again each time (about 1 CPU-s of an idle run).
RUN /opt/venv/bin/python -m compileall -q --invalidation-mode checked-hash plugins etcd_runbook_operator \
      etcd_runbook
# The release stamp (hack/release gives hack/build-operator-image the same): VERSION is the
# repository's VERSION file, REVISION the git commit built.
#   docker build --build-arg VERSION="$(cat VERSION)" --build-arg REVISION="$(git rev-parse HEAD)" .
ARG VERSION=unknown
ARG REVISION=unknown
LABEL org.opencontainers.image.title="etcd-runbook-operator" \
      org.opencontainers.image.description="A Kubernetes operator for etcd whose operational knowledge lives in Ansible runbooks" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
ENV ETCD_RUNBOOK_OPERATOR_VERSION=${VERSION} \
    PATH=/opt/venv/bin:$PATH \
    ANSIBLE_CONFIG=/opt/etcd-runbook-operator/ansible.cfg \
    ANSIBLE_PYTHON_INTERPRETER=/opt/venv/bin/python \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# -P: operator.py must not shadow the standard library's `operator`; the .pth file above puts
# this directory on sys.path after the standard library.
ENTRYPOINT ["/opt/venv/bin/python", "-P", "/opt/etcd-runbook-operator/operator.py"]
