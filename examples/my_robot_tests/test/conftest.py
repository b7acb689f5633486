# One line enables the simulated robot fixture (sim_robot) for every test here.
pytest_plugins = ['mujoco_hal_ros.testing.plugin']
