from setuptools import setup

setup(
    name='my_robot_tests',
    version='0.1.0',
    packages=['my_robot_tests'],
    data_files=[('share/ament_index/resource_index/packages', ['resource/my_robot_tests']),
                ('share/my_robot_tests', ['package.xml'])],
    install_requires=['setuptools'],
    tests_require=['pytest'],
    entry_points={'console_scripts': ['wave = my_robot_tests.wave:main']},
)
