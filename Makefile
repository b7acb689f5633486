# The two commands: `make run` and `make test`. Both do the set-up they need first.
SHELL := /bin/bash
ENV := set +u; . .venv/bin/activate && . install/setup.bash; set -u;
ROS_DOMAIN_ID ?= 42
export ROS_DOMAIN_ID

.PHONY: setup build run test bench clean

setup:
	@bash scripts/setup.sh

build: setup

# The simulated device on the built-in bench arm, headless, until Ctrl-C; the log's first
# lines give the web viewer's URL (WEB_VIEWER=0 turns it off).
WEB_VIEWER ?= 8080
run: setup
	@$(ENV) exec install/mujoco_hal_ros/lib/mujoco_hal_ros/sim_node --ros-args \
	  -p log_summary:=true -p web_viewer:=$(WEB_VIEWER) $(RUN_ARGS)

# Build, run every test tier with colcon, and fail on any failure.
test: setup
	@$(ENV) colcon --log-base log test --base-paths . --packages-select mujoco_hal_ros \
	  --build-base build --install-base install \
	  --event-handlers console_direct+ --pytest-args -q || true
	@$(ENV) python scripts/test_summary.py build

bench: setup
	@$(ENV) for b in bench/bench_*.py; do echo "== $$b"; python $$b --quick || exit 1; done

clean:
	rm -rf build install log
