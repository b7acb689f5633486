"""Small ONNX policies written with the ``onnx`` package's helper API (tests, benchmarks, demos).

Why here and not in a test: a hand-written controller exported as ONNX is how a user checks
that the evaluation, the device and later the robot run the same file; ``linear`` writes one
(a PD law is linear in the task's observation), ``mlp`` a randomly initialised network of the
shape learned locomotion policies have, for timing. Both take float32 ``(batch, obs)``.
"""

from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnx


def _save(graph: 'onnx.GraphProto', path: str) -> str:
    import onnx
    from onnx import helper
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)],
                              producer_name='mujoco_hal_ros')
    model.ir_version = 8        # what every onnxruntime of the last years reads
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def linear(weight: np.ndarray, path: str, bias: np.ndarray | None = None,
           clip: float | None = None) -> str:
    """``a = clip(obs @ weight + bias)``; ``weight`` is ``(obs, act)``."""
    from onnx import helper, numpy_helper, TensorProto
    w = np.asarray(weight, dtype=np.float32)
    b = np.zeros(w.shape[1], np.float32) if bias is None else np.asarray(bias, np.float32)
    inits = [numpy_helper.from_array(w, 'W'), numpy_helper.from_array(b, 'b')]
    nodes = [helper.make_node('MatMul', ['obs', 'W'], ['xw']),
             helper.make_node('Add', ['xw', 'b'], ['act' if clip is None else 'raw'])]
    if clip is not None:
        inits += [numpy_helper.from_array(np.array(-clip, np.float32), 'lo'),
                  numpy_helper.from_array(np.array(clip, np.float32), 'hi')]
        nodes.append(helper.make_node('Clip', ['raw', 'lo', 'hi'], ['act']))
    graph = helper.make_graph(
        nodes, 'linear_policy',
        [helper.make_tensor_value_info('obs', TensorProto.FLOAT, ['batch', w.shape[0]])],
        [helper.make_tensor_value_info('act', TensorProto.FLOAT, ['batch', w.shape[1]])], inits)
    return _save(graph, path)


def mlp(sizes: Sequence[int], path: str, seed: int = 0, scale: float = 0.1) -> str:
    """A tanh MLP ``sizes[0] -> ... -> sizes[-1]`` with seeded random weights."""
    from onnx import helper, numpy_helper, TensorProto
    rng = np.random.default_rng(seed)
    inits, nodes, x = [], [], 'obs'
    for k, (a, b) in enumerate(pairwise(sizes)):
        w = (rng.standard_normal((a, b)) * scale).astype(np.float32)
        inits += [numpy_helper.from_array(w, f'W{k}'),
                  numpy_helper.from_array(np.zeros(b, np.float32), f'b{k}')]
        nodes += [helper.make_node('MatMul', [x, f'W{k}'], [f'm{k}']),
                  helper.make_node('Add', [f'm{k}', f'b{k}'], [f'z{k}'])]
        last = k == len(sizes) - 2
        nodes.append(helper.make_node('Tanh', [f'z{k}'], ['act' if last else f'h{k}']))
        x = f'h{k}'
    graph = helper.make_graph(
        nodes, 'mlp_policy',
        [helper.make_tensor_value_info('obs', TensorProto.FLOAT, ['batch', sizes[0]])],
        [helper.make_tensor_value_info('act', TensorProto.FLOAT, ['batch', sizes[-1]])], inits)
    return _save(graph, path)
