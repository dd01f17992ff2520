"""Objects the scheduler reads (Node, Pod, PodGroup, Queue, PriorityClass) and how manifests become them."""
