"""sim_node: the simulated device on ROS 2 (state streams, cameras, control, TF).
"""
