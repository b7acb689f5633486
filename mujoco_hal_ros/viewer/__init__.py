"""A live view of the running simulation in a browser (MuJoCo Studio's web viewer)."""

from .pool_source import PoolSource
from .web import WebViewer, viewer_available

__all__ = ['PoolSource', 'WebViewer', 'viewer_available']
