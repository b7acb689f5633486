"""A small URDF forward kinematics from the XML alone (ElementTree + numpy).

Independent of mujoco_hal_ros and of MuJoCo, so comparing its poses with MuJoCo's checks
the generated URDF rather than the code that wrote it.
"""

import xml.etree.ElementTree as ET

import numpy as np


def rpy_matrix(r, p, y):
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def axis_angle(axis, angle):
    k = np.asarray(axis, float) / np.linalg.norm(axis)
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx


def _floats(text, default):
    return np.array([float(v) for v in text.split()]) if text else np.array(default, float)


class Urdf:
    def __init__(self, text):
        root = ET.fromstring(text)
        self.links = [link.get('name') for link in root.findall('link')]
        self.joints = {}
        children = set()
        for j in root.findall('joint'):
            origin = j.find('origin')
            xyz = _floats(origin.get('xyz') if origin is not None else None, [0, 0, 0])
            rpy = _floats(origin.get('rpy') if origin is not None else None, [0, 0, 0])
            axis = j.find('axis')
            limit = j.find('limit')
            self.joints[j.get('name')] = {
                'type': j.get('type'), 'parent': j.find('parent').get('link'),
                'child': j.find('child').get('link'), 'xyz': xyz, 'rot': rpy_matrix(*rpy),
                'axis': _floats(axis.get('xyz') if axis is not None else None, [1, 0, 0]),
                'limit': None if limit is None else limit.attrib}
            children.add(j.find('child').get('link'))
        self.root = [link for link in self.links if link not in children]
        self.by_child = {j['child']: (name, j) for name, j in self.joints.items()}
        self.root_xml = root

    def fk(self, q):
        """World (position, rotation) of every link for joint values ``q`` (name -> value)."""
        poses = {}

        def pose(link):
            if link in poses:
                return poses[link]
            if link not in self.by_child:
                poses[link] = (np.zeros(3), np.eye(3))
                return poses[link]
            name, j = self.by_child[link]
            ppos, prot = pose(j['parent'])
            pos, rot = ppos + prot @ j['xyz'], prot @ j['rot']
            v = q.get(name, 0.0)
            if j['type'] in ('revolute', 'continuous'):
                rot = rot @ axis_angle(j['axis'], v)
            elif j['type'] == 'prismatic':
                pos = pos + rot @ (np.asarray(j['axis']) / np.linalg.norm(j['axis']) * v)
            poses[link] = (pos, rot)
            return poses[link]

        for link in self.links:
            pose(link)
        return poses
