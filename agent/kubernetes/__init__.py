"""The agent's Kubernetes side: the kubelet's on-disk layout and topology policy (:mod:`.kubelet`), this
node as the API server knows it — labels, the eviction taint, batch allocatable in its status
(:mod:`.node`) — the node's pods from the API server (:mod:`.pods`) and evictions through the
Eviction API (:mod:`.evictor`)."""
