"""The world at run time: named snapshots, teleport, physics options, live-state queries,
pixel-to-world and live domain randomization, all without rclpy."""
