"""The agent's Kubernetes side: the kubelet's on-disk layout, this node as the API server knows it
(labels, the eviction taint), and — with the Kubernetes pod source and evictor — how the agent
learns its pods and evicts them through the API."""
