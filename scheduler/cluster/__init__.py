"""Cluster state: what the scheduler knows between cycles.

The cache of objects (nodes, pods, PodGroups, queues, priority classes), the node view built from
the agents' reports, the per-node inventory (NUMA cells, devices), and the effects interface through
which a run mode carries a decision out. The framework reads this package; nothing here reads the
framework, the plugins, the actions or a mode.
"""
