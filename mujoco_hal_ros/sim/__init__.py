"""Simulation: the stepper thread that owns MjData, the Device facade, its model swap
(``swap``), the narrow interfaces its parts are given (``ports``), the robots of a world and
ground-truth entities.
"""
