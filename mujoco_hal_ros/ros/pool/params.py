"""pool_node parameters: one table, each entry read-only after start.

The sizes are checked against the pool's own limits here, before anything is built, so a
bad one stops the node with one line naming it; the model and its keyframe are checked
by the node when it loads them.
"""

from ...pool import MAX_NBATCH, MAX_NSTEP, MAX_NTHREAD
from ..parameters import Param, ParameterTable
from ..sim.params import existing_dirs, policy_params

TABLE = ParameterTable([
    Param('model', 'string', '', 'MJCF path; empty: the built-in bench arm.'),
    Param('nbatch', 'integer', 256, f'Environments in the pool, 1..{MAX_NBATCH}.',
          range=(1, MAX_NBATCH)),
    Param('nthread', 'integer', 0, f'Threads stepping them, 1..{MAX_NTHREAD}; 0: one per CPU '
          'core.', range=(0, MAX_NTHREAD), rule=f'0 (one per core) or 1..{MAX_NTHREAD}'),
    Param('keyframe', 'string', '', 'Keyframe every environment starts from, and where '
          'evaluate and reset begin when given neither states nor a keyframe (empty: the '
          "model's reset state)."),
    Param('chunk_steps', 'integer', 50, f'Steps between progress feedback and cancel checks, '
          f'1..{MAX_NSTEP}.', range=(1, MAX_NSTEP)),
    Param('ray_address', 'string', '', "Empty: the pool runs in this process; 'local' (a new "
          "local Ray), 'auto' or host:port: a RayPool, one shard per Ray CPU."),
    Param('web_viewer', 'integer', 0, 'Serve a live browser view of one environment on this '
          'port; 0 = off.', range=(0, 65535), rule='0 (off) or a port 1..65535'),
    Param('web_viewer_host', 'string', '127.0.0.1', 'Interface the web viewer binds.'),
    Param('web_viewer_env', 'integer', 0, 'The environment the web viewer shows.',
          range=(0, MAX_NBATCH - 1)),
    *policy_params('evaluate_policy'),
    Param('dataset_folder', 'string', '', 'Folder the LeRobot datasets that evaluate_policy '
          'goals name (a relative name each) are written into, created if missing; empty: '
          'goals naming a dataset are refused FORBIDDEN.'),
    Param('resource_roots', 'string_array', [], 'Directories that a task file (and the model '
          'it names) or a .onnx policy named over evaluate_policy must lie under; empty: any '
          'file this process can read.', check=existing_dirs),
])
