# The README's two commands are `make serve` and `make test`; everything else is a helper.
.PHONY: setup serve test bench clean

setup:
	@scripts/bootstrap.sh

serve: setup
	.venv/bin/tilefarm serve

test: setup
	.venv/bin/python -m pytest -q $(PYTEST_ARGS)

bench: setup
	.venv/bin/python bench/run_all.py

clean:
	rm -rf .venv .tilefarm .pytest_cache build *.egg-info
