# Two commands do everything on a fresh machine:
#   make demo   - creates .venv, writes a small SYNTHETIC nightly history (so Trends and regressions have a
#                 change point to show), runs two sweeps on the stand-in server, imports the shipped H200
#                 runs into ./specbench.db, opens the dashboard (`make demo-db`: all but the dashboard;
#                 benchmarks/demo_build.py times it on a fresh clone)
#   make test   - creates .venv, runs the whole test suite (starts a throwaway PostgreSQL when one is installed)
# .venv holds exactly what requirements.lock pins (uv, installed once into .tools by pip); `make lock` writes the
# lock again after pyproject.toml's dependencies change.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DB ?= sqlite:///specbench.db
PORT ?= 8501
UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
# Wheels this host keeps on disk, where it has them: the CPU build of torch the lock pins (2.13.0+cpu) is one.
# Without such a folder, that build comes from PyTorch's own CPU index.
FIND_LINKS ?= $(wildcard /opt/wheels)
TORCH_CPU_INDEX := --extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match
UV_SOURCES := $(if $(FIND_LINKS),--find-links $(FIND_LINKS),$(TORCH_CPU_INDEX))
# The platform the lock is resolved for: the project's machines and CI (Linux x86_64, CPython 3.11).
LOCK_TARGET := --python-version 3.11 --python-platform x86_64-manylinux_2_28

.PHONY: setup lock demo demo-db dashboard test lint bench clean

setup: $(VENV)/.installed

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install -qq --disable-pip-version-check uv==$(UV_VERSION)

$(VENV)/.installed: requirements.lock pyproject.toml | $(UV)
	$(UV) venv -q --allow-existing --python $(PYTHON) $(VENV)
	$(UV) pip sync -q --python $(BIN)/python $(UV_SOURCES) requirements.lock
	$(UV) pip install -q --python $(BIN)/python --no-deps -e .
	touch $@

lock: | $(UV)
	$(UV) pip compile -q --extra dev $(LOCK_TARGET) $(UV_SOURCES) --generate-hashes --no-header \
		--output-file requirements.lock pyproject.toml

# Each sweep's report (every point, every correctness verdict) goes to logs/demo/; the log shows its outcome.
DEMO_LOGS := logs/demo
demo: demo-db
	$(BIN)/specbench dashboard --db $(DB) --port $(PORT) --open-browser

demo-db: setup
	@mkdir -p $(DEMO_LOGS)
	$(BIN)/specbench seed --shape small --points 600 --once --db $(DB)
	$(BIN)/specbench run sweeps/demo-sim.yaml --db $(DB) --resume > $(DEMO_LOGS)/demo-sim.txt
	@grep -hE "^run [0-9]+[ :]|points measured" $(DEMO_LOGS)/demo-sim.txt; echo "  (report: $(DEMO_LOGS)/demo-sim.txt)"
	$(BIN)/specbench import examples/h200-sglang-0.5.13.post1.db --db $(DB)
	$(BIN)/specbench import examples/h200-v3slice-paired.db --db $(DB)
	$(BIN)/specbench import examples/h200-v3slice-grid/grid.db --db $(DB)
	$(BIN)/specbench run sweeps/demo-sim-candidate.yaml --db $(DB) --resume --label candidate \
		> $(DEMO_LOGS)/demo-sim-candidate.txt
	@grep -hE "^run [0-9]+[ :]|points measured" $(DEMO_LOGS)/demo-sim-candidate.txt; \
		echo "  (report: $(DEMO_LOGS)/demo-sim-candidate.txt)"

dashboard: setup
	$(BIN)/specbench dashboard --db $(DB) --port $(PORT) --open-browser

test: setup
	bash scripts/test.sh

lint: setup
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy bench db analysis runners dashboard synthetic

bench: setup
	$(BIN)/python benchmarks/client_ceiling.py
	$(BIN)/python benchmarks/dashboard_scale.py

clean:
	rm -rf $(VENV) $(TOOLS) logs specbench.db specbench.db-wal specbench.db-shm
