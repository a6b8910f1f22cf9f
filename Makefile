# FedPortal. Two commands set everything up: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install system-deps migrate demo test test-fast test-e2e-debug bench check lint clean

install: $(VENV)/.installed  ## venv with every pinned dependency (idempotent)

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "FedPortal needs Python 3.11 (set PYTHON=...)"'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	touch $@

system-deps:  ## Debian packages the tests need: chromium (browser tests) and kubectl
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v kubectl >/dev/null 2>&1 || missing="$$missing kubernetes-client"; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

migrate: install
	$(PY) manage.py migrate --noinput

demo: install migrate  ## simulated fleet + worker + beat + web on http://127.0.0.1:8000
	$(PY) manage.py demo

test: install system-deps  ## the whole suite: unit, integration (real worker + simulator), browser
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test-e2e-debug: install system-deps  ## the browser suite with DEBUG on, as `make demo` runs it
	$(VENV)/bin/pytest -o django_debug_mode=true tests/e2e $(PYTEST_ARGS)

bench: install  ## benchmarks; figures in var/bench/latest.json
	$(PY) tests/bench/run_all.py

lint: install  ## ruff (pyproject.toml): lint incl. import order, and formatting
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

check: install lint
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

clean:
	rm -rf var/test_* var/broker-test-* var/cache-test-* var/worker-*.log
