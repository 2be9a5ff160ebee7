"""Pick an offscreen OpenGL backend for MuJoCo before robosuite is imported.

robosuite reads MUJOCO_GL once, at import time (and defaults it to egl on Linux), so this must run first. EGL (headless, also Mesa's
software EGL on machines without a GPU) is preferred; osmesa (apt package libosmesa6) is the fallback.
"""

from __future__ import annotations

import atexit
import ctypes.util
import os
import sys
from typing import Callable

_BACKEND_LIBS = {"egl": "EGL", "osmesa": "OSMesa"}


def available_backends() -> list[str]:
    """Offscreen backends whose shared library can be found on this machine, in preference order."""
    return [name for name, lib in _BACKEND_LIBS.items() if ctypes.util.find_library(lib)]


def configure_gl(preferred: str | None = None) -> str:
    """Set MUJOCO_GL / PYOPENGL_PLATFORM (unless the user already did) and return the backend chosen."""
    chosen = os.environ.get("MUJOCO_GL") or preferred
    if not chosen:
        found = available_backends()
        if not found:
            raise RuntimeError(
                "no offscreen OpenGL library found: install libegl1 + libegl-mesa0 (EGL) or libosmesa6 "
                "(osmesa) with apt-get, see robots/README.md"
            )
        chosen = found[0]
    bindings = sys.modules.get("robosuite.utils.binding_utils")
    if bindings is not None and getattr(bindings, "_MUJOCO_GL", chosen) != chosen:
        # Too late to switch: robosuite picked its render context class at import. Say so, don't fail later.
        raise RuntimeError(f"robosuite was imported with MUJOCO_GL={bindings._MUJOCO_GL!r} before "
                           f"configure_gl({chosen!r}); call configure_gl first or set MUJOCO_GL")
    os.environ["MUJOCO_GL"] = chosen
    # PyOpenGL (used by robosuite's render contexts) must agree with MuJoCo's choice.
    if chosen in ("egl", "osmesa"):
        os.environ.setdefault("PYOPENGL_PLATFORM", chosen)
    return chosen


_BEFORE_EGL_EXIT: list[Callable[[], None]] = []  # exit hooks that free render contexts


def close_before_egl_exit(hook: Callable[[], None]) -> None:
    """Run `hook` at interpreter exit while EGL still works (it frees render contexts). mujoco and robosuite each
    register eglTerminate at exit when they make their first context, and both terminate the same display; exit
    hooks run last-registered first, so such hooks are moved to the end here and by `gl_context_made()`.
    Otherwise every context still alive is freed after eglTerminate and prints an EGLError traceback."""
    if hook not in _BEFORE_EGL_EXIT:
        _BEFORE_EGL_EXIT.append(hook)
    gl_context_made()


def gl_context_made() -> None:
    """Call after making a mujoco or robosuite render context (which may have registered eglTerminate)."""
    for hook in _BEFORE_EGL_EXIT:
        atexit.unregister(hook)
        atexit.register(hook)
