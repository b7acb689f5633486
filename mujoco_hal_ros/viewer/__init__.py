"""A live view of the running simulation in a browser (MuJoCo Studio's web viewer)."""

from .web import WebViewer, viewer_available

__all__ = ['WebViewer', 'viewer_available']
