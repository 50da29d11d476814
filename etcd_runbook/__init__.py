"""The one home of the runbooks' Python: what filters, modules, Jobs and the watcher import.

Layers, lowest first; a layer imports only from those below it (checked by import-linter in
`make lint`, contracts in pyproject.toml):

- `names`: the vocabulary, every label, annotation and finalizer name the project writes;
- `rules`: pure decisions, from observed facts to a plan (no I/O; table-driven unit tests);
- `clients`: talking to etcd, Kubernetes, an object store, and making certificates;
- `operations`: one step against a live system (a member added, a snapshot saved);
- `observe`: a run's one look at a cluster, built from the operations and clients.

Filter plugins (plugins/filter/) are thin maps from filter names to functions in `rules`;
modules (library/) parse their arguments, call `operations` or `observe`, and report.
See docs/design-decisions.md, "One home for decisions".
"""
