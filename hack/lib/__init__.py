"""What the demo, the benchmarks and the tests share: starting and stopping Scoria's processes,
scraping metrics, free ports (processes.py), real-cgroup sandboxes (real_cgroups.py) and fixture
cgroup trees (cgroup_fixtures.py); the online HTTP service (online.py), units of CPU work and the
offline hogs (cpuwork.py), the open-loop load generator (loadgen.py), latency percentiles
(stats.py), the test functions of an upstream Go clone (gotests.py) and committed files the scripts
make (generated.py).  Imports Scoria, never the tests."""
