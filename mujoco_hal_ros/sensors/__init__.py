"""What a simulator user reads: sensors, lidar, point clouds, contacts, and pushes (no rclpy)."""
