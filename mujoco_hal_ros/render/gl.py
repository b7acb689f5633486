"""Pick a headless OpenGL backend for MuJoCo before its rendering is set up.

MuJoCo's Python package reads ``MUJOCO_GL`` once, at ``import mujoco`` (its
``rendering.classic.gl_context`` module is imported by ``mujoco/__init__.py``), not at the
first ``Renderer``. With ``MUJOCO_GL`` unset it picks GLFW, which needs a display: on a
robot computer or in CI with no ``DISPLAY`` the first camera frame then fails deep inside
GLFW. So ``ensure_headless_gl()`` must run before the first ``import mujoco`` of the process;
``camera.py`` calls it before its own import, and launch entry points should call it first.

When mujoco was already imported with the GLFW default and no display, and PyOpenGL has not
been loaded for another platform yet, the EGL context class is swapped in at the one place
``mujoco.Renderer`` looks it up at construction (``gl_context.GLContext``): that is the only
late repair that does not depend on import order, and it is reported in the return value.
"""

import ctypes.util
import os
import platform
import sys

from ..errors import ConfigError

_EGL_PACKAGES = 'libegl1 libegl-mesa0 libgl1-mesa-dri'
_OSMESA_PACKAGE = 'libosmesa6'
_HEADLESS = ('egl', 'osmesa')

INSTALL_HINT = (f'install EGL with `sudo apt-get install {_EGL_PACKAGES}` (Mesa software '
                f'rendering works without a GPU), or set MUJOCO_GL=osmesa after '
                f'`sudo apt-get install {_OSMESA_PACKAGE}` (slower)')


def _has_display():
    return bool(os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY'))


def _mujoco_backend():
    """The backend an already imported mujoco will use, or None if mujoco is not imported."""
    module = sys.modules.get('mujoco.rendering.classic.gl_context')
    if module is None:
        return None
    cls = getattr(module, 'GLContext', None)
    if cls is None:
        return 'disabled'
    name = getattr(cls, '__module__', '') or ''
    for backend in ('egl', 'osmesa', 'glfw', 'cgl'):
        if name.endswith('.' + backend):
            return backend
    return name or 'unknown'


def _swap_in_egl():
    """Late repair: make mujoco.Renderer build EGL contexts although mujoco chose GLFW."""
    opengl = sys.modules.get('OpenGL')
    if opengl is not None and os.environ.get('PYOPENGL_PLATFORM', 'egl') != 'egl':
        raise ConfigError('mujoco was imported before ensure_headless_gl() and PyOpenGL is '
                          'already bound to another platform; set MUJOCO_GL=egl in the '
                          'environment before starting the process')
    os.environ.setdefault('PYOPENGL_PLATFORM', 'egl')
    try:
        from mujoco.egl import GLContext
    except Exception as err:  # noqa: BLE001 - missing libEGL shows up as many error types
        raise ConfigError(f'EGL is unavailable ({err}); {INSTALL_HINT}') from err
    module = sys.modules['mujoco.rendering.classic.gl_context']
    module.GLContext = GLContext
    for name in ('mujoco', 'mujoco.gl_context'):
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, 'GLContext'):
            mod.GLContext = GLContext


def ensure_headless_gl() -> str:
    """Choose EGL when nothing else was asked for and there is no display; idempotent.

    Returns the backend name mujoco will use (``'egl'``, ``'osmesa'``, ``'glfw'``...). A value
    the user set in ``MUJOCO_GL`` always wins: they may know better (OSMesa in a sandbox,
    GLFW with a virtual display).
    """
    if platform.system() != 'Linux':
        return os.environ.get('MUJOCO_GL', '') or 'default'
    chosen = os.environ.get('MUJOCO_GL', '').strip().lower()
    if not chosen and not _has_display():
        os.environ['MUJOCO_GL'] = 'egl'
        chosen = 'egl'
    if chosen == 'egl':
        os.environ.setdefault('PYOPENGL_PLATFORM', 'egl')
    elif chosen == 'osmesa':
        os.environ.setdefault('PYOPENGL_PLATFORM', 'osmesa')
    backend = _mujoco_backend()
    if backend is None:                       # mujoco not imported yet: the env var decides
        return chosen or 'glfw'
    if backend == 'glfw' and chosen == 'egl':
        _swap_in_egl()
        return 'egl'
    return backend


def egl_library_present() -> bool:
    """Cheap check for libEGL, so an error can name the missing package rather than a symbol."""
    return ctypes.util.find_library('EGL') is not None


def probe() -> str | None:
    """Create and free a 1x1 GL context; return None when it works, else what to do.

    Tests use this to skip with a reason; ``CameraRenderer`` raises the same text as a
    ConfigError. It runs in the caller's thread and leaves no context current.
    """
    backend = ensure_headless_gl()
    try:
        from mujoco.rendering.classic import gl_context  # what mujoco.Renderer uses
        cls = getattr(gl_context, 'GLContext', None)
        if cls is None:
            return f'mujoco rendering is disabled (MUJOCO_GL={os.environ.get("MUJOCO_GL")!r})'
        context = cls(1, 1)
        try:
            context.make_current()
        finally:
            context.free()
    except Exception as err:  # noqa: BLE001 - GL failures come as many error types
        return describe_failure(err, backend)
    return None


def describe_failure(err: BaseException, backend: str | None = None) -> str:
    """Turn a GL context failure into a message that says which packages fix it."""
    backend = backend or os.environ.get('MUJOCO_GL') or 'glfw'
    text = f'{type(err).__name__}: {err}'.strip()
    if backend == 'egl':
        if not egl_library_present():
            return f'OpenGL via EGL failed: libEGL not found ({text}); {INSTALL_HINT}'
        return f'OpenGL via EGL failed ({text}); {INSTALL_HINT}'
    if backend == 'osmesa':
        return (f'OpenGL via OSMesa failed ({text}); install it with '
                f'`sudo apt-get install {_OSMESA_PACKAGE}` or use MUJOCO_GL=egl')
    if not _has_display():
        return (f'OpenGL via {backend} failed with no DISPLAY ({text}); call '
                f'ensure_headless_gl() before importing mujoco or set MUJOCO_GL=egl; '
                f'{INSTALL_HINT}')
    return f'OpenGL via {backend} failed ({text})'
