"""Motion: minimum-jerk goal paths, joint trajectories, inverse kinematics, Cartesian lines.

Pure functions and plans over a model and a state; the stepper samples the plans, so none of
this runs on the physics thread except a plan's ``sample``.
"""
