"""Rendering: headless GL selection, double-buffered offscreen targets, named cameras.
"""
