"""A live view of the running simulation in a browser (MuJoCo Studio's web viewer)."""

from .pool_source import PoolSource
from .web import viewer_available, WebViewer

__all__ = ['PoolSource', 'WebViewer', 'viewer_available']
