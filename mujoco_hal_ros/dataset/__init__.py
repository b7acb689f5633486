"""Demonstrations as LeRobotDataset v3.0 folders (no rclpy, no PyTorch).

``features_for`` names a robot's features, ``DatasetWriter`` writes episodes of frames in
LeRobot's own layout (Parquet through pyarrow, MP4 through PyAV), ``DatasetReader`` reads
them back as numpy and ``check_dataset`` lists what a folder gets wrong about the format.
"""

from .check import check_dataset
from .layout import CODEBASE_VERSION, features_for
from .reader import DatasetReader, read_dataset
from .writer import DatasetWriter, WriterStatus

__all__ = ['CODEBASE_VERSION', 'DatasetReader', 'DatasetWriter', 'WriterStatus',
           'check_dataset', 'features_for', 'read_dataset']
