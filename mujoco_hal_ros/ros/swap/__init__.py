"""What lets a real arm's launch file swap in the simulation: joint_trajectory_controller
and topic_based_ros2_control interfaces on the same names.
"""
