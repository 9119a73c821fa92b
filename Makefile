# hermes: the two set-up commands of the README, both installing exactly requirements/lock.txt.
#   make run          creates .venv from the lock, installs hermes, runs the embedded quickstart on 4 ranks
#   make test         same environment, runs the whole test suite (MPI tests under real mpiexec) on two
#                     pytest-xdist workers (TEST_WORKERS=N to change)
#   make test-fast    the quick subset: every test not marked slow (pytest -m "not slow")
#   make results      renders every page of results/ and the index BENCHMARKS.md from the benchmarks' caches
#                     (seconds); RUN=thesis,cfd reruns those pages' benchmarks first (their caches refreshed),
#                     RUN=1 (or quick) every benchmark of a few minutes, RUN=all every one (hours)
#   make lock         re-resolves requirements/lock.txt after a change of pyproject.toml, keeping other pins
#   make lock-upgrade moves every pin of the lock to the newest allowed release (then run make test)
#   make check-lock   proves the lock installs from the package registries alone, no pip cache, in a throwaway venv
#   make check-lock-fetch  the registries still serve every file of the lock for this platform, hashes checked
#                     (no cache, no install: what .ci/run adds to make test, which installs the same files)
#   make check-wheel  builds hermes' wheel from the working tree (files git tracks or would add), installs it in a
#                     throwaway venv resolving pyproject's ranges from the registries (pip cache allowed: a library
#                     user's `pip install .`), checks the wheel holds every file of hermes/, then runs the embedded
#                     quickstart from outside the source tree, where no source file can stand in for a missing one,
#                     and reads it back as DataFrames
#   make check-mpich  the MPICH variant a user gets with `pip install .[mpich]`: a fresh venv of the lock plus the
#                     MPICH wheel from the registries (pip cache allowed), checks that mpi4py loads MPICH and hermes
#                     launches MPICH's mpiexec, runs the quickstart there, then MPICH_TESTS (launch, error lines, the
#                     job's end, hosting on 2 processes, the virtual clock's results bit for bit those of .venv's
#                     Open MPI: tests/test_flavours.py) under that venv
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
LOCK   := requirements/lock.txt
# the lock: every package pinned and hash-checked (pip refuses anything unlisted or altered)
LOCKED := --require-hashes -r $(LOCK)
# the editable install adds only hermes, built by the setuptools of the lock (no unpinned build environment)
EDITABLE := --no-deps --no-build-isolation -e .

# make lock: uv in a venv of its own (never in .venv, which holds exactly the lock)
UV_VERSION := 0.13.9
TOOLS      := .venv-lock
UV_COMPILE := $(TOOLS)/bin/uv pip compile pyproject.toml --extra test requirements/build.in \
              --universal --fork-strategy fewest --python-version 3.11 --generate-hashes \
              --custom-compile-command "make lock" --quiet -o $(LOCK)
CHECK_VENV ?= $(or $(TMPDIR),/tmp)/hermes-check-lock
WHEEL_VENV ?= $(or $(TMPDIR),/tmp)/hermes-check-wheel
MPICH_VENV ?= $(or $(TMPDIR),/tmp)/hermes-check-mpich
# no pip configuration file (no local wheel directories or extra indexes) and no cache: the registry only
REGISTRY_ONLY := env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_INDEX_URL PIP_CONFIG_FILE=/dev/null

.PHONY: run test test-fast bench results lock lock-upgrade check-lock check-lock-fetch check-wheel check-mpich clean

# A new lock gives a new venv (--clear), so .venv never keeps a package the lock dropped.
# pip says what it does (each package collected, downloaded; a bar on a terminal), and requirements/heartbeat.py
# a line after every 5 s pip is silent (installing the collected packages takes 20-30 s without a word): the
# set-up's longest step is never silent. --progress-bar on is pip's default, said for a pip configured otherwise.
PIP_SHOW := --progress-bar on
HEARTBEAT := $(PYTHON) requirements/heartbeat.py
$(VENV)/.lock-installed: $(LOCK)
	$(PYTHON) -m venv --clear $(VENV)
	$(HEARTBEAT) $(BIN)/python -m pip install $(PIP_SHOW) $(LOCKED)
	touch $@

# pip check fails if pyproject.toml asks for something the lock does not give (then: make lock).
$(VENV)/.hermes-installed: $(VENV)/.lock-installed pyproject.toml
	$(HEARTBEAT) $(BIN)/python -m pip install $(PIP_SHOW) $(EDITABLE)
	$(BIN)/python -m pip check
	touch $@

run: $(VENV)/.hermes-installed
	$(BIN)/hermes run

# the suite on TEST_WORKERS pytest-xdist workers (two: a 2-core machine's cores; each MPI test's job runs within
# its worker's test), the tests handed out one by one as workers free up
TEST_WORKERS ?= 2
TEST_XDIST   := -n $(TEST_WORKERS) --dist worksteal

test: $(VENV)/.hermes-installed
	$(BIN)/python -m pytest -q $(TEST_XDIST)

test-fast: $(VENV)/.hermes-installed
	$(BIN)/python -m pytest -q -m "not slow" $(TEST_XDIST)

bench: $(VENV)/.hermes-installed
	$(BIN)/python -m benchmarks.bench_phase

results: $(VENV)/.hermes-installed
	$(BIN)/python -m benchmarks.render $(if $(filter 1,$(RUN)),--run quick,$(if $(RUN),--run $(RUN)))

$(TOOLS)/bin/uv:
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet uv==$(UV_VERSION)

lock: $(TOOLS)/bin/uv
	$(UV_COMPILE)

lock-upgrade: $(TOOLS)/bin/uv
	$(UV_COMPILE) --upgrade

check-lock:
	rm -rf $(CHECK_VENV)
	$(PYTHON) -m venv $(CHECK_VENV)
	$(REGISTRY_ONLY) $(CHECK_VENV)/bin/python -m pip install --quiet --no-cache-dir $(LOCKED)
	$(REGISTRY_ONLY) $(CHECK_VENV)/bin/python -m pip install --quiet --no-cache-dir --no-deps --no-build-isolation .
	$(CHECK_VENV)/bin/python -m pip check
	$(CHECK_VENV)/bin/python -c "from mpi4py import MPI; import hermes.cli, pymetis, gmsh; from pyscotch import libscotch; \
	  print('check-lock: installs;', MPI.Get_library_version().split(',')[0])"
	rm -rf $(CHECK_VENV)

check-lock-fetch:
	rm -rf $(CHECK_VENV)
	$(PYTHON) -m venv $(CHECK_VENV)
	$(REGISTRY_ONLY) $(CHECK_VENV)/bin/python -m pip install --quiet --dry-run --ignore-installed --no-cache-dir $(LOCKED)
	rm -rf $(CHECK_VENV)
	@echo "check-lock-fetch: every file of $(LOCK) for this platform is served with its locked hash"

check-wheel:
	rm -rf $(WHEEL_VENV)
	mkdir -p $(WHEEL_VENV)/src
	git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null \
	  | tar -xf - -C $(WHEEL_VENV)/src
	$(PYTHON) -m venv $(WHEEL_VENV)/venv
	$(REGISTRY_ONLY) $(WHEEL_VENV)/venv/bin/python -m pip wheel --quiet --no-deps -w $(WHEEL_VENV)/dist $(WHEEL_VENV)/src
	$(REGISTRY_ONLY) $(WHEEL_VENV)/venv/bin/python -m pip install --quiet $(WHEEL_VENV)/dist/*.whl
	$(WHEEL_VENV)/venv/bin/python -m pip check
	cd $(WHEEL_VENV)/src && $(WHEEL_VENV)/venv/bin/python -c "import pathlib, sys, zipfile; \
	  wheel = set(zipfile.ZipFile(next(pathlib.Path('../dist').glob('*.whl'))).namelist()); \
	  missing = sorted(str(f) for f in pathlib.Path('hermes').rglob('*') if f.is_file() and str(f) not in wheel \
	                   and '__pycache__' not in f.parts); \
	  sys.exit(f'check-wheel: missing from the wheel: {missing}' if missing else 0)"
	rm -rf $(WHEEL_VENV)/src
	cd $(WHEEL_VENV) && venv/bin/hermes run --out run
	test -s $(WHEEL_VENV)/run/summary.json && test -s $(WHEEL_VENV)/run/phases.png
	cd $(WHEEL_VENV) && venv/bin/python -c "import hermes; run = hermes.load_run('run'); phases, ranks = run.to_pandas(); \
	  assert len(phases) == len(run.phases) > 0 and len(ranks) == len(run.ranks) > 0, (phases.shape, ranks.shape)"
	@echo "check-wheel: $$(cd $(WHEEL_VENV)/dist && ls *.whl) installs and runs the quickstart ($$(cd $(WHEEL_VENV) && \
	  venv/bin/python -c "import json; print(json.load(open('run/summary.json'))['versions']['mpi'].split(',')[0])"))"
	rm -rf $(WHEEL_VENV)

# The MPI tests (marker `mpi`) run under MPICH: a set chosen to fit CI's time, since MPICH busy-polls and its
# oversubscribed jobs are slower on 2 cores than Open MPI's (docs/TESTING.md gives the times): both libraries'
# results compared, the launch and its error lines, the bad-input catalogue under mpiexec, a job's end (signals,
# the watchdog, a killed rank resumed), plug-ins misbehaving in the job, hosting on 2 and 3 processes, and the
# quickstart's runs of tests/mpi/test_run.py. MPICH_TESTS=tests make check-mpich runs every MPI test there.
MPICH_TESTS ?= tests/test_flavours.py tests/test_launch.py tests/test_bad_input.py tests/mpi/test_lifecycle.py \
               tests/test_plugins.py tests/test_hosting.py \
               tests/mpi/test_run.py::test_virtual_clock_is_deterministic_and_outputs_are_complete \
               tests/mpi/test_run.py::test_more_processes_than_processors_is_one_line_on_every_rank \
               tests/mpi/test_run.py::test_wall_clock_fills_the_same_columns
MPICH_PY    := $(MPICH_VENV)/venv/bin/python

check-mpich: $(VENV)/.hermes-installed
	rm -rf $(MPICH_VENV)
	$(PYTHON) -m venv $(MPICH_VENV)/venv
	$(REGISTRY_ONLY) $(MPICH_PY) -m pip install --quiet $(LOCKED)
	$(REGISTRY_ONLY) $(MPICH_PY) -m pip install --quiet --no-build-isolation -e '.[mpich]'
	$(MPICH_PY) -m pip check
	$(MPICH_PY) -c "from mpi4py import MPI; from hermes.runtime.launch import find_mpiexec, mpi_flavour; \
	  lib = MPI.Get_library_version(); exe = find_mpiexec(); \
	  assert lib.startswith('MPICH') and mpi_flavour(exe) == 'mpich', (lib.splitlines()[0], exe); \
	  print('check-mpich: mpi4py loads', ' '.join(lib.splitlines()[0].split()), '- hermes launches', exe)"
	mkdir -p $(MPICH_VENV)/work
	cd $(MPICH_VENV)/work && $(MPICH_VENV)/venv/bin/hermes run --out quickstart
	test -s $(MPICH_VENV)/work/quickstart/phases.png
	$(MPICH_PY) -c "import json, sys; s = json.load(open(sys.argv[1])); \
	  assert s['complete'] and s['versions']['mpi'].startswith('MPICH') and len(s['phases']) == 4, s['versions']; \
	  print('check-mpich: the quickstart ran under', ' '.join(s['versions']['mpi'].split(',')[0].split()), \
	        '- total', s['total_time'])" \
	  $(MPICH_VENV)/work/quickstart/summary.json
	HERMES_REQUIRE_PEER=1 HERMES_PEER_PYTHON=$(abspath $(BIN)/python) $(MPICH_PY) -m pytest -q -p no:cacheprovider -m mpi $(MPICH_TESTS)
	rm -rf $(MPICH_VENV)

clean:
	rm -rf $(VENV) $(TOOLS) runs .pytest_cache
