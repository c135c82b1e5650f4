# specbench images. Two targets (and `source`, the files both copy):
#   app  the CLI, scheduler, dashboard and stand-in (`worker-sim`) workers: no GPU, what requirements.lock pins.
#   gpu  a worker that launches real SGLang servers: CUDA base image plus `pip install .[gpu]`.
# docker-compose.yml builds both; see docs/team-setup.md.

ARG PYTHON_IMAGE=python:3.11-slim
# CUDA 13 matches the torch/sglang-kernel wheels of the pinned SGLang release; devel (not runtime) because
# flashinfer compiles some kernels just in time with nvcc.
ARG CUDA_IMAGE=nvidia/cuda:13.0.0-devel-ubuntu24.04

# The sources both images install, listed once.
FROM scratch AS source
COPY pyproject.toml README.md requirements.lock /app/
COPY bench /app/bench
COPY db /app/db
COPY analysis /app/analysis
COPY runners /app/runners
COPY dashboard /app/dashboard
COPY synthetic /app/synthetic
COPY sweeps /app/sweeps

FROM ${PYTHON_IMAGE} AS app
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --create-home --uid 10001 specbench
WORKDIR /app
COPY --from=source /app ./
# Exactly what requirements.lock pins, hash-checked, as `make setup` installs it (torch is its CPU build, from
# PyTorch's CPU index). Editable: the dashboard's page scripts (dashboard/pages) are files Streamlit runs, not a
# package that a regular install would copy; an editable install serves them from /app.
RUN pip install --require-hashes --no-deps --extra-index-url https://download.pytorch.org/whl/cpu \
        -r requirements.lock \
    && pip install --no-deps -e . && mkdir -p /var/log/specbench && chown specbench /var/log/specbench
USER specbench
CMD ["specbench", "--help"]

FROM ${CUDA_IMAGE} AS gpu
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive
# Ubuntu 24.04's Python 3.12, in a venv so pip never touches the system's packages. libnuma1: sgl_kernel.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev libnuma1 git \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv \
    && useradd --create-home --uid 10001 specbench
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
COPY --from=source /app ./
RUN pip install -e '.[gpu]' && mkdir -p /var/log/specbench && chown specbench /var/log/specbench
USER specbench
CMD ["specbench", "worker", "--log-dir", "/var/log/specbench"]
