# Every target installs what it needs: the venv at .venv/ from the pinned requirements.txt,
# etcd and Kubernetes binaries built through the Go module proxy and cached outside the repo.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum requirements.txt | cut -c1-12)
PYTEST := $(VENV)/bin/pytest
# The bash scripts that run (the files under hack/cluster.d/ are sourced and checked through them).
SHELL_SCRIPTS := $(shell grep -rlE '^\#!/usr/bin/env bash' hack | sort)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help venv lint test test-unit test-etcd test-cluster test-e2e test-nodes test-molecule chaos demo bench release lock clean

help:
	@echo "make demo   - local Kubernetes + operator + a sample EtcdCluster becoming Available"
	@echo "make test   - lint and every test suite (unit, real etcd, local Kubernetes, e2e)"
	@echo "make lint | test-unit | test-etcd | test-cluster | test-e2e | test-molecule | test-nodes | chaos | bench"
	@echo "make release [IMAGE=registry.example.com/etcd-runbook-operator] - dist/: image, install.yaml, playbooks"

$(STAMP): requirements.txt
	rm -f $(VENV)/.installed-*
	test -x $(PY) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements.txt
	@# The repository on the venv's path, after the standard library (as the image's .pth does):
	@# filters, modules and Jobs import etcd_runbook from here.
	$(PY) -c 'import sys, sysconfig; open(sysconfig.get_paths()["purelib"] + "/etcd-runbook-operator.pth", "w").write(sys.argv[1] + "\n")' $(CURDIR)
	touch $@

venv: $(STAMP)

lint: venv
	ruff check .
	ruff format --check .
	mypy
	lint-imports --no-cache
	$(PY) hack/crd-embed --check
	ansible-lint --profile production -q
	shellcheck -x $(SHELL_SCRIPTS)
	test -z "$$(gofmt -l hack/lincheck)" && cd hack/lincheck && GOTOOLCHAIN=local go vet ./...

# Two workers: 130 s instead of 242 s for the whole unit suite (2 cores).
test-unit: venv
	@# promtool for the alert rules and metrics tests: about 2 min to build cold, before any test's clock.
	hack/promtool --version >/dev/null
	$(PYTEST) -q -n 2 --dist worksteal tests/unit

# Real etcd on loopback, two test processes side by side (each its own block of ports:
# tests/etcd_cluster.py). ETCD_WORKERS=1: one by one.
ETCD_WORKERS ?= 2
test-etcd: venv
	$(PYTEST) -q -n $(ETCD_WORKERS) --dist worksteal -m etcd tests/modules
	@# Alone: its clients and faults take both cores, and beside it a module test's memory
	@# bound (a snapshot streamed in bounded memory) failed: 186 MiB of growth, 79 alone.
	$(PYTEST) -q -m etcd tests/chaos

# Seeded chaos runs of their own length (make test runs them short); every run prints its
# CHAOS_SEED, which replays it: make chaos CHAOS_SEED=... CHAOS_SECONDS=...
# First on real etcd on loopback, then through the operator on the local Kubernetes (with etcd's
# benchmark tool beside the clients, at rest and through the faults; a node stopped on three
# nodes last).
CHAOS_SECONDS ?= 300
chaos: venv
	CHAOS_SECONDS=$(CHAOS_SECONDS) $(PYTEST) -q -s tests/chaos
	CHAOS_SECONDS=$(CHAOS_SECONDS) CHAOS_BENCHMARK=1 $(PYTEST) -q -s -m chaos tests/e2e

# Two workers (each test its own namespace; session set-up under tests/session_lock.py):
# 304 s instead of 539 s.
test-cluster: venv
	$(PYTEST) -q -n 2 --dist worksteal -m cluster tests/cluster tests/operator

# One scenario at a time: side by side (5.2 min) the load made members miss health checks,
# and a scenario's promote and verify failed on it.
test-molecule: venv
	hack/cluster up >/dev/null
	molecule test --all

# Independent tests run side by side (each in its own namespace, one operator for all). Those
# that stop or kill the operator (the chaos run through it among them, 40 s of faults) run
# after them, one by one: among the others, each made the other worker wait first for the
# test it was running, then for it (about 6 minutes of a run). E2E_WORKERS=1: all one by one.
E2E_WORKERS ?= 2
test-e2e: venv
	$(PYTEST) -q -n $(E2E_WORKERS) --dist worksteal --durations=0 \
		-m "e2e and not nodes and not operator_exclusive and not chaos" tests/e2e
	$(PYTEST) -q --durations=0 -m "e2e and not nodes and operator_exclusive" tests/e2e

# Last: it grows the local Kubernetes to three nodes and leaves it on one again.
test-nodes: venv
	$(PYTEST) -q -m nodes tests/e2e

test: lint test-unit test-etcd test-cluster test-molecule test-e2e test-nodes

demo: venv
	hack/demo

bench: venv
	$(PY) bench/run.py

# The VERSION file's release in dist/ (hack/release): the image as a docker-archive tagged
# $(IMAGE):<version> (etcd-runbook-operator unless IMAGE is given), install.yaml and
# install-namespaced.yaml on that image, the break-glass playbooks, SHA256SUMS.
release: venv
	$(PY) hack/release $(if $(IMAGE),--image $(IMAGE))

lock:
	python3 -m venv /tmp/lockvenv && /tmp/lockvenv/bin/pip install -q -r requirements.in
	{ echo "# Frozen from requirements.in with: make lock"; /tmp/lockvenv/bin/pip freeze; } > requirements.txt

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache artifacts
