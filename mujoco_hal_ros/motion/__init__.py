"""Motion: minimum-jerk goal paths, joint trajectories, inverse kinematics, Cartesian lines.

Pure functions and plans over a model and a state, and the running moves (``runner``).
What runs on the physics thread is small and goes through its one door
(``sim.physics.Physics``): the stepper samples the plans (a plan's ``sample``), and the
closures of ``runner`` and ``joint_trajectory`` start a plan from the setpoints, settle a
move after each chunk and end it. Nothing heavy does: IK and planning run on the caller's
thread, a re-aim's IK on the runner's own thread.
"""
