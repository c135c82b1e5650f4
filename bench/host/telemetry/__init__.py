"""What the GPUs, the host's CPUs and the server's processes did during each window: `gpu`, `host_cpu`,
`server_cpu`, and `window`, the sampler that reads and summarises them."""

from bench.host.telemetry.gpu import throttle_reason
from bench.host.telemetry.window import ProbeOn, TelemetrySource, WindowTelemetry
