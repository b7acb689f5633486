"""Write frames with LeRobot's own writer (``LeRobotDataset.create``), for comparison.

Runs under a Python with PyTorch and ``lerobot-dataset`` (test_dataset_lerobot.py starts
it). FRAMES.npz holds ``features`` (the feature dicts as JSON), ``lengths``, ``tasks``
and per frame ``<feature>/<i>``; the dataset goes to ROOT.

    python lerobot_write.py ROOT REPO_ID FPS FRAMES.npz
"""

import json
import os
import sys

os.environ.setdefault('HF_HUB_OFFLINE', '1')

from ledataset.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402
import numpy as np  # noqa: E402


def main(root, repo_id, fps, frames_npz):
    data = np.load(frames_npz)
    features = json.loads(str(data['features']))
    for spec in features.values():
        spec['shape'] = tuple(spec['shape'])
    ds = LeRobotDataset.create(repo_id, fps=int(fps), features=features, root=root,
                               robot_type='bench_arm', use_videos=True)
    index = 0
    for length, task in zip(data['lengths'].tolist(), data['tasks'].tolist(), strict=True):
        for _ in range(length):
            frame = {key: data[f'{key}/{index}'] for key in features}
            ds.add_frame({**frame, 'task': task})
            index += 1
        ds.save_episode()
    ds.finalize()


if __name__ == '__main__':
    main(*sys.argv[1:5])
