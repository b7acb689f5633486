"""Load a dataset with LeRobot's own LeRobotDataset, offline, and report what it sees.

Runs under a Python with PyTorch and ``lerobot-dataset`` (module ``ledataset``), which may
be another environment than the tests' (test_dataset_lerobot.py starts it); it only
reports, as one JSON object on stdout; every judgement is made by the test.

    python lerobot_check.py ROOT REPO_ID FRAMES.npz   (or - for no rendered frames)
"""

import json
import os
import sys

os.environ.setdefault('HF_HUB_OFFLINE', '1')      # never reach for the Hub: a local folder

from ledataset.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402


def main(root, repo_id, frames_npz):
    want = np.load(frames_npz) if frames_npz != '-' else None    # '-': no renders to match
    ds = LeRobotDataset(repo_id, root=root)
    meta = ds.meta
    out = {
        'torch': torch.__version__,
        'fps': ds.fps, 'num_frames': ds.num_frames, 'num_episodes': ds.num_episodes,
        'len': len(ds),
        'features': {k: {'dtype': v['dtype'], 'shape': list(v['shape'])}
                     for k, v in ds.features.items()},
        'camera_keys': meta.camera_keys, 'video_backend': ds.video_backend,
        'episodes': [{'from': int(meta.episodes[i]['dataset_from_index']),
                      'to': int(meta.episodes[i]['dataset_to_index']),
                      'length': int(meta.episodes[i]['length']),
                      'tasks': list(meta.episodes[i]['tasks'])}
                     for i in range(meta.total_episodes)],
        'stats': {k: {s: np.asarray(v).tolist() for s, v in st.items()}
                  for k, st in meta.stats.items()},
        'items': [],
    }
    for index in range(len(ds)):
        item = ds[index]
        entry = {'index': int(item['index']), 'episode_index': int(item['episode_index']),
                 'frame_index': int(item['frame_index']), 'task': item['task'],
                 'timestamp': float(item['timestamp']),
                 'state': item['observation.state'].tolist(),
                 'action': item['action'].tolist(),
                 'dtypes': {k: str(v.dtype) for k, v in item.items() if hasattr(v, 'dtype')},
                 'shapes': {k: list(v.shape) for k, v in item.items() if hasattr(v, 'shape')},
                 'image_error': {}}
        for key in (meta.camera_keys if want is not None else []):
            image = item[key]                       # C x H x W float in [0, 1]
            rendered = want[f'{key}/{index}'].astype(np.float64) / 255.0
            got = image.permute(1, 2, 0).double().numpy()
            entry['image_error'][key] = float(np.abs(got - rendered).mean() * 255.0)
            if int(item['frame_index']) > 0:
                # where the previous render differs clearly (the arm moved), is the decoded
                # frame nearer its own render than the previous one?
                previous = want[f'{key}/{index - 1}'].astype(np.float64) / 255.0
                moved = np.abs(rendered - previous).max(axis=2) > 40 / 255.0
                if moved.sum() >= 20:
                    entry.setdefault('moved', {})[key] = [
                        float(np.abs(got - rendered)[moved].mean() * 255.0),
                        float(np.abs(got - previous)[moved].mean() * 255.0)]
        out['items'].append(entry)
    # episode boundaries as a policy's data loader sees them: a frame one step back from an
    # episode's first frame is padding, not the previous episode's last frame
    key = meta.camera_keys[0] if meta.camera_keys else None
    delta = {'action': [-1 / ds.fps, 0.0]}
    if key:
        delta[key] = [-1 / ds.fps, 0.0]
    windowed = LeRobotDataset(repo_id, root=root, delta_timestamps=delta)
    out['windows'] = []
    for e in range(meta.total_episodes):
        first = int(meta.episodes[e]['dataset_from_index'])
        item = windowed[first]
        out['windows'].append({'episode': e, 'action_is_pad': item['action_is_pad'].tolist(),
                               'action': item['action'].tolist(),
                               'video_shape': list(item[key].shape) if key else None})
    print(json.dumps(out))


if __name__ == '__main__':
    main(*sys.argv[1:4])
