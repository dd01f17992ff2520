"""cgroups: version backends (v1 via cgroupspy, v2 plain files), kubelet layouts, and the one executor."""
