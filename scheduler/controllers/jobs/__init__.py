"""The batch.volcano.sh Job controller: the Job and Command API (parsing, defaults, admission), the
objects a Job makes (PodGroup, pods), its lifecycle state machine and the reconcile decision."""
