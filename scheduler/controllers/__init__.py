"""Controllers: loops that turn users' higher-level objects into the ones the scheduler places.

* :mod:`.jobs` — Volcano's ``batch.volcano.sh`` Job (and ``bus.volcano.sh`` Command): parsing with
  Volcano's defaults, admission, the lifecycle state machine and the reconcile decision;
* :mod:`.jobplugins` — the Job plugins (env, svc, ssh, pytorch, tensorflow, mpi, ray), one registry;
* :mod:`.podgroups` — PodGroups for plain workloads (Deployments, StatefulSets, batch Jobs);
* :mod:`.host` — the :class:`~.host.Host` a run mode implements, and the in-memory one;
* :mod:`.loop` — one reconcile of everything through a host.

Decisions are pure (objects and memory in, effects out); the loop applies the effects through the
host.  A controller sits beside the modes, above the cluster state, and imports no plugin, action or
session (import-linter contracts in pyproject.toml).
"""
