# Two entry points: `make run` (the whole application on embedded defaults) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST := $(PY) -m pytest -q -p no:cacheprovider

.PHONY: run test test-fast test-integration browser-deps sandbox-deps gates

run: $(VENV)/.runtime
	$(PY) -m hermes_web.launch

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip

$(VENV)/.runtime: requirements.txt | $(VENV)/bin/python
	$(VENV)/bin/pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(VENV)/bin/python
	@start=$$(date +%s); $(VENV)/bin/pip install -q -r requirements-dev.txt && \
	  echo "== install: $$(( $$(date +%s) - start )) s"
	touch $@ $(VENV)/.runtime

# Debian's chromium for the browser tests (Playwright cannot download browsers here).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# Debian's bubblewrap: the terminal tool runs every command in its sandbox, and never without it.
sandbox-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null; }

# Gates first (lint, migrations in step with the models, types of the pure core and llm), then
# the fast tier on SQLite with no services (spread over the cores), then the integration tier (real
# Redis, Celery worker, Daphne, simulator, Chromium) on SQLite; then, when DATABASE_URL is set, the
# integration tier on that database too, less the tests marked one_database (their own stack on the
# embedded defaults, or a subject that does not depend on the backend), and the backend's own fast tests.
# (The fast tier beside the integration tier took 422 s against 80 s alone, and the integration tier
# slowed as much: the two contend for the same two cores.)
# Each step's time goes to $(TIMES) as it ends and the list is printed at the end (a failing
# step prints its own line before make stops).
TIMES := artifacts/test-times.txt
timed = start=$$(date +%s); $(2); rc=$$?; line="$(1): $$(( $$(date +%s) - start )) s"; \
	echo "$$line" >> $(TIMES); echo "== $$line"; exit $$rc
# The integration tier runs on three pytest-xdist workers, a module to a worker (more workers than
# cores: its tests spend much of their time waiting on processes, leases and pages): each worker starts
# its own stack (Redis, simulator, Celery worker, Daphne) on free ports, with its own test database.
INTEGRATION := $(PYTEST) -n 3 --dist loadfile --durations=12 -m

# Fast tests whose subject depends on the backend (the database's own full-text search, FTS5 or
# tsvector, trigrams or pg_trgm; a conversation exported and imported whole, with its search text;
# per-user limits, whose counting under concurrent sends rests on the backend's locking):
# run again on DATABASE_URL when it is set.
BACKEND_TESTS := tests/web/test_recall_index.py tests/web/test_recall_suggest.py tests/web/test_conversation_export_import.py \
	tests/web/test_limits.py tests/web/test_limits_concurrency.py

test: $(VENV)/.dev browser-deps sandbox-deps
	@mkdir -p artifacts; rm -f $(TIMES)
	@$(call timed,gates,$(MAKE) --no-print-directory gates)
	@$(call timed,fast tier,env -u DATABASE_URL $(PYTEST) -n auto --durations=8 -m "not integration")
	@$(call timed,integration tier (SQLite),env -u DATABASE_URL $(INTEGRATION) integration)
	@if [ -n "$$DATABASE_URL" ]; then $(call timed,integration tier (DATABASE_URL),$(INTEGRATION) "integration and not one_database"); fi
	@if [ -n "$$DATABASE_URL" ]; then $(call timed,backend-specific fast tests (DATABASE_URL),$(PYTEST) -n 2 $(BACKEND_TESTS)); fi
	@echo "== times"; cat $(TIMES)

gates: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	env -u DATABASE_URL $(PY) manage.py makemigrations --check --dry-run
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict compression/core
	$(VENV)/bin/vulture hermes_web sessions compression llm simulator staff plugins vulture_whitelist.py \
	  --min-confidence 60 --exclude "*/migrations/*,hermes_web/settings.py" \
	  --ignore-decorators "@admin.register,@admin.action,@admin.display,@register,@receiver,@shared_task,@*.connect"

test-fast: $(VENV)/.dev sandbox-deps
	env -u DATABASE_URL $(PYTEST) -n auto -m "not integration"

test-integration: $(VENV)/.dev browser-deps
	$(INTEGRATION) integration
