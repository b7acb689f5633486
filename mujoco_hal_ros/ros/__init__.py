"""The ROS 2 layer: nodes that translate messages to core calls and back. Needs rclpy."""
