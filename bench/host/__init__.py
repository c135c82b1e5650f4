"""The host around a measurement: GPUs, CPU affinity, processes, telemetry, the host-speed probe, the reaper."""
