# The README's two commands are `make serve` and `make test`; everything else is a helper.
.PHONY: setup serve test bench clean

setup:
	@scripts/bootstrap.sh

serve: setup
	.venv/bin/tilefarm serve

# two test processes (pytest-xdist), a test file each at a time: module-scoped servers stay in one process; the
# longest files first (tests/conftest.py orders them by tests/file_seconds.json)
PYTEST_WORKERS ?= 2

# Python's bytecode caches (__pycache__, git-ignored) are written even where the environment turns them off
# (PYTHONDONTWRITEBYTECODE=1): every test process collects every test module (pytest's assert rewriting included) and
# every service stack a test starts imports the project again in its API, worker, pool and sandbox zygote; without the
# caches each of those compiles the project's source anew (~6 CPU s a test process's collection, ~2 CPU s a stack)
test: setup
	PYTHONDONTWRITEBYTECODE= .venv/bin/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

bench: setup
	.venv/bin/python bench/run_all.py

clean:
	rm -rf .venv .tilefarm .pytest_cache build *.egg-info
