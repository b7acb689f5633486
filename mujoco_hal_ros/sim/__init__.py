"""Simulation: the stepper thread that owns MjData, the Device facade, ground-truth entities.
"""
