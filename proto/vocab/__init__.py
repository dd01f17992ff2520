"""The vocabulary both sides speak: quantities, QoS levels and batch resource names, placement and device
annotations, durations and daily windows. Plain functions and values: it imports neither the agent nor the
scheduler."""
