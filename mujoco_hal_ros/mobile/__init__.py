"""Mobile bases: the drive controllers of a robot's own controllers file, in simulation.

ros2_controllers' diff_drive_controller, mecanum_drive_controller and the steering
controllers (ackermann, bicycle, tricycle) turn a body twist into wheel speeds and
steering angles, limit it, and integrate odometry from the wheels' measured joint states.
This package does the same without rclpy: ``config`` reads the controller blocks,
``kinematics`` holds each drive's geometry, ``limiter`` and ``odometry`` are the
controllers' speed limiter and odometry, and ``base`` runs a controller on a ``Device``
(the node only turns messages into ``BaseController.command`` calls and odometry back).
"""
