"""Controllers: loops that turn users' higher-level objects into the ones the scheduler places
(the Volcano Job controller, the PodGroup controller for plain workloads). Empty until they land;
a controller sits beside the modes, above the cluster state, and imports no plugin or action."""
