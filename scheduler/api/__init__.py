"""Objects the scheduler reads (Node, Pod, PodGroup, Queue, PriorityClass), how manifests become them,
and the checks a node's report passes before anything in it is kept (``nodereport``)."""
