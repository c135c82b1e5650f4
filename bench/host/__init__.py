"""The host around a measurement: GPUs, CPU affinity, processes, telemetry, host-speed probe, reaper."""
