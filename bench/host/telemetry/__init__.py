"""What the GPUs, the host's CPUs and the server's own processes did during each measurement window.

One module per source: `gpu` (clocks, power, utilisation, clock-event reasons), `host_cpu` (load, busy,
steal, pressure), `server_cpu` (the server's process tree and the CPUs its busiest process ran on), and
`window`, the sampler that reads them through a window and summarises them for the stored repeat.
"""

from bench.host.telemetry.gpu import throttle_reason
from bench.host.telemetry.window import ProbeOn, TelemetrySource, WindowTelemetry

__all__ = ["ProbeOn", "TelemetrySource", "WindowTelemetry", "throttle_reason"]
