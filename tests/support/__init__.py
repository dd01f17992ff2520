"""What the tests share: object builders, fixture trees, and fakes shaped on the real interfaces
(the Kubernetes API server, NVML). Process and real-cgroup helpers the benchmarks also use live in
``hack/lib``."""
