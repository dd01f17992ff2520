"""The scheduler's Kubernetes mode: informers into the cache, effects through the API server, leader election."""
