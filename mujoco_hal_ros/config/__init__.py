"""The device file and what it resolves to: YAML parsing, units, channels, limits.

Everything here is checked once, at load or at the boundary of a request, and never touches
the simulation, which is what lets a refused request change nothing.
"""
