"""What the demo, the benchmarks and the tests share: starting and stopping Scoria's processes,
scraping metrics, free ports, real-cgroup sandboxes and fixture cgroup trees. Imports Scoria, never
the tests."""
