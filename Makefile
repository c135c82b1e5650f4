# Two commands do everything on a fresh machine:
#   make demo   - creates .venv, writes a small SYNTHETIC nightly history (so Trends and regressions have a
#                 change point to show), runs two sweeps on the stand-in server, imports the shipped H200
#                 runs into ./specbench.db, opens the dashboard
#   make test   - creates .venv, runs the whole test suite (starts a throwaway PostgreSQL when one is installed)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DB ?= sqlite:///specbench.db
PORT ?= 8501

.PHONY: setup demo dashboard test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

demo: setup
	$(BIN)/specbench seed --shape small --points 600 --once --db $(DB)
	$(BIN)/specbench run sweeps/demo-sim.yaml --db $(DB) --resume
	$(BIN)/specbench import examples/h200-sglang-0.5.13.post1.db --db $(DB)
	$(BIN)/specbench import examples/h200-v3slice-paired.db --db $(DB)
	$(BIN)/specbench import examples/h200-v3slice-grid/grid.db --db $(DB)
	$(BIN)/specbench run sweeps/demo-sim-candidate.yaml --db $(DB) --resume --label candidate
	$(BIN)/specbench dashboard --db $(DB) --port $(PORT) --open-browser

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
	rm -rf $(VENV) logs specbench.db specbench.db-wal specbench.db-shm
