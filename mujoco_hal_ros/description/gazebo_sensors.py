"""The sensors a robot description declares, read without ROS: Gazebo tags and ros2_control.

Nearly every ROS robot description declares its sensors for a simulator: Gazebo Classic
``<gazebo reference="link"><sensor type="ray|gpu_ray|camera|depth|multicamera|imu|contact|
force_torque">`` with ``libgazebo_ros_*`` plugins (ROS 2's ``<ros><namespace>``,
``<remapping>``, ``<frame_name>``, ``<camera_name>``, ``<output_type>``, and ROS 1's
``<topicName>``, ``<frameName>``, ``<cameraName>``...), Gazebo Sim ``<sensor
type="gpu_lidar|lidar|camera|depth_camera|rgbd_camera|imu|contact|force_torque">`` with
``<topic>`` and ``<gz_frame_id>``, and ``<ros2_control>`` ``<sensor>`` components (IMU,
force-torque, by their state interfaces). A stack that needs ``/scan`` must find it here
as it does in Gazebo, so this module turns each into one ``SensorDeclaration``: its kind,
the link it sits on and its pose there, the topics and frame its messages go out on, its
rate, resolution, field of view, samples, ranges and Gaussian noise, as the tag gives them.

Nothing is silent: every tag, plugin or value that is not used (an unknown plugin, a
distortion model, a NaN, 10^9 samples) adds one note saying what was done instead, and
every number is bounded (clamped with a note, or the sensor left out with a note), so a
hostile description costs no more than a sane one. ``parse`` never raises on content.

The declarations travel inside the MJCF the URDF import writes (``to_json``/``from_json``,
in a custom text element), so the node that loads the model finds them with the model.

Why one module of this size: it is one reader of one vocabulary (Gazebo's and
ros2_control's sensor tags); ``_SensorReader`` holds the per-sensor rules, and the bounds,
the notes and the topic naming it uses are shared by every kind, so the sensor kinds do not
split cleanly; the declarations it produces (``SensorDeclaration``) are small and stay with
the reader that defines their meaning.
"""

from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
import json
import math
import xml.etree.ElementTree as ET

KINDS = ('lidar', 'camera', 'depth', 'rgbd', 'imu', 'contact', 'force_torque')
TEXT_NAME = 'mujoco_hal_ros.sensors'       # the MJCF custom text that carries them
MAX_SENSORS = 64
MAX_SAMPLES = 8192                 # rays along one axis of a scan
MAX_RAYS = 1 << 18                 # rays of one scan in all (a 64 x 4096 lidar)
MAX_SIDE = 2048                    # pixels along one side of an image
MAX_PIXELS = 1 << 22               # pixels of one image (2048 x 2048)
MAX_RATE = 1000.0                  # Hz
MAX_CAMERA_RATE = 240.0            # Hz (sim_node's camera rate parameters stop there)
MAX_RANGE = 1000.0                 # m
MAX_STD = 1e3
MAX_NAME = 128
DEFAULT_RATE = {'lidar': 10.0, 'camera': 30.0, 'depth': 30.0, 'rgbd': 30.0, 'imu': 100.0,
                'contact': 100.0, 'force_torque': 100.0}

# Gazebo sensor types -> kinds, both simulators
CLASSIC_TYPES = {'ray': 'lidar', 'gpu_ray': 'lidar', 'camera': 'camera', 'depth': 'depth',
                 'multicamera': 'camera', 'imu': 'imu', 'contact': 'contact',
                 'force_torque': 'force_torque'}
SIM_TYPES = {'gpu_lidar': 'lidar', 'lidar': 'lidar', 'camera': 'camera',
             'depth_camera': 'depth', 'depth': 'depth', 'rgbd_camera': 'rgbd',
             'rgbd': 'rgbd', 'imu': 'imu', 'contact': 'contact', 'force_torque': 'force_torque',
             'ray': 'lidar', 'gpu_ray': 'lidar', 'multicamera': 'camera'}
# Plugins known per kind (file name without lib prefix / .so suffix)
PLUGINS = {
    'gazebo_ros_ray_sensor': 'lidar', 'gazebo_ros_laser': 'lidar',
    'gazebo_ros_gpu_laser': 'lidar', 'gazebo_ros_block_laser': 'lidar',
    'gazebo_ros_velodyne_laser': 'lidar', 'gazebo_ros_velodyne_gpu_laser': 'lidar',
    'gazebo_ros_range': 'lidar',
    'gazebo_ros_camera': 'camera', 'gazebo_ros_multicamera': 'camera',
    'gazebo_ros_depth_camera': 'depth', 'gazebo_ros_openni_kinect': 'depth',
    'gazebo_ros_imu_sensor': 'imu', 'gazebo_ros_imu': 'imu', 'hector_gazebo_ros_imu': 'imu',
    'gazebo_ros_bumper': 'contact', 'gazebo_ros_ft_sensor': 'force_torque',
}
# Plugin parameters read here, or that change nothing a subscriber sees
PLUGIN_KEYS = {'ros', 'output_type', 'frame_name', 'frameName', 'frameId', 'frame_id',
               'camera_name', 'cameraName', 'topicName', 'updateRate', 'updateRateHZ',
               'alwaysOn', 'always_on', 'robotNamespace', 'imageTopicName',
               'cameraInfoTopicName', 'depthImageTopicName', 'depthImageCameraInfoTopicName',
               'pointCloudTopicName', 'gaussianNoise', 'accelGaussianNoise',
               'rateGaussianNoise', 'bodyName', 'initial_orientation_as_reference',
               'gaussian_noise', 'serviceName', 'bumperTopicName', 'imu', 'radiation_type',
               'radiation', 'fov'}
# What a <camera> may carry (read here, noted where it is read, or changing nothing seen)
CAMERA_KEYS = {'horizontal_fov', 'image', 'clip', 'noise', 'distortion', 'lens', 'pose',
               'camera_info_topic', 'depth_camera', 'visibility_mask', 'triggered',
               'trigger_topic'}
# What a sensor element may carry without changing what a real driver would publish
HARMLESS = {'always_on', 'visualize', 'plugin', 'pose', 'update_rate', 'topic',
            'gz_frame_id', 'ignition_frame_id', 'frame_id', 'enable_metrics'}


@dataclass(frozen=True)
class Gaussian:
    """Gaussian noise added to each reading: ``mean`` (a bias) and ``stddev``."""

    mean: float = 0.0
    stddev: float = 0.0

    @property
    def off(self) -> bool:
        return not (self.mean or self.stddev)


@dataclass
class SensorDeclaration:
    """One sensor of the description, in ROS terms.

    ``pose``: x y z roll pitch yaw in ``link``; ``frame``: the header frame_id ('' = the
    link, or for images the link's optical frame); ``topics``: role -> topic name
    (relative names resolve in the node's namespace, as Gazebo's in its root one). Roles:
    lidar ``scan`` or ``points``; cameras ``image``, ``info`` and with depth ``depth``,
    ``depth_info``, ``points``; ``imu``; ``wrench``; ``contact``. ``noise``: role ->
    Gaussian (lidar ``range``; imu ``accel``, ``gyro``, ``orientation``; ``force``,
    ``torque``)."""

    name: str
    kind: str
    link: str
    source: str                     # gazebo_classic, gazebo_sim or ros2_control
    pose: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    frame: str = ''
    rate: float = 0.0
    topics: dict[str, str] = field(default_factory=dict)
    noise: dict[str, Gaussian] = field(default_factory=dict)
    # lidar
    samples: int = 0
    min_angle: float = 0.0
    max_angle: float = 0.0
    vertical_samples: int = 1
    vertical_min_angle: float = 0.0
    vertical_max_angle: float = 0.0
    range_min: float = 0.0
    range_max: float = 0.0
    # cameras
    width: int = 0
    height: int = 0
    horizontal_fov: float = 0.0
    near: float = 0.0
    far: float = 0.0
    # contact: the collisions the tag names
    collisions: tuple[str, ...] = ()
    # force-torque: the wrench the child applies to the parent (Gazebo's default) or the
    # parent to the child (what MuJoCo's force and torque sensors measure)
    measure_direction: str = 'parent_to_child'
    # a ray sensor published as sensor_msgs/Range: infrared or ultrasound
    radiation: str = ''

    def to_dict(self) -> dict:
        return asdict(self)


def to_json(decls: list[SensorDeclaration]) -> str:
    return json.dumps([d.to_dict() for d in decls], sort_keys=True)


def from_json(text: str) -> list[SensorDeclaration]:
    """What ``to_json`` wrote (a model's custom text); anything else gives []."""
    try:
        rows = json.loads(text)
    except ValueError:
        return []
    out = []
    for row in rows if isinstance(rows, list) else []:
        try:
            row = dict(row)
            row['noise'] = {k: Gaussian(**v) for k, v in row.get('noise', {}).items()}
            row['pose'] = tuple(float(v) for v in row.get('pose', ()))
            row['collisions'] = tuple(row.get('collisions', ()))
            out.append(SensorDeclaration(**row))
        except (TypeError, ValueError):
            continue
    return out


# --- reading helpers --------------------------------------------------------------------

def _local(tag: object) -> str:
    """A tag without an XML namespace (``{uri}sensor`` -> ``sensor``)."""
    return tag.rsplit('}', 1)[-1] if isinstance(tag, str) else ''


def _child(elem: ET.Element | None, *path: str) -> ET.Element | None:
    """The first element along ``path`` (tags without namespaces), or None."""
    for tag in path:
        if elem is None:
            return None
        elem = next((c for c in elem if _local(c.tag) == tag), None)
    return elem


def _text(elem: ET.Element | None, *path: str) -> str | None:
    got = _child(elem, *path)
    if got is None or got.text is None:
        return None
    text = got.text.strip()
    return text if text else None


class _Notes:
    """The notes of one parse: each says what was not used and what was done instead."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, where: str, what: str) -> None:
        self.lines.append(f'{where}: {what}')


def _short(text: object, limit: int = 60) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f'…({len(text)} chars)'


def _number(text: str | None, where: str, notes: _Notes, default: float, lo: float, hi: float,
            what: str) -> float:
    """``text`` as a float in [lo, hi]; NaN, infinities, junk: ``default`` with a note;
    out of range: clamped with a note."""
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        notes.add(where, f'{what} {_short(text)!r} is no number; {default:g} used')
        return default
    if not math.isfinite(value):
        notes.add(where, f'{what} {_short(text)!r} is not finite; {default:g} used')
        return default
    if value < lo or value > hi:
        clamped = min(max(value, lo), hi)
        notes.add(where, f'{what} {value:g} is outside {lo:g}..{hi:g}; {clamped:g} used')
        return clamped
    return value


def _count(text: str | None, where: str, notes: _Notes, default: float, hi: float,
           what: str) -> int:
    value = _number(text, where, notes, float(default), 1.0, float(hi), what)
    return int(round(value))


def _name(text: str | None) -> str:
    """A usable name: ASCII word characters only, bounded."""
    text = ''.join(c if (c.isascii() and (c.isalnum() or c == '_')) else '_'
                   for c in (text or '')[:MAX_NAME])
    return text.strip('_') or 'sensor'


def _topic(text: str | None) -> str:
    """A ROS topic name from what a tag gives: characters ROS refuses become ``_``, a
    token starting with a digit gets a ``_`` before it, empty tokens go; ``/`` in front
    (absolute) and ``~/`` (the plugin node's own) are kept. '' when nothing is left."""
    text = (text or '').strip()[:256]
    head = '/' if text.startswith('/') else ('~/' if text.startswith('~/') else '')
    tokens = []
    for token in text[len(head):].split('/'):
        token = ''.join(c if c.isascii() and (c.isalnum() or c == '_') else '_'
                        for c in token)
        if token:
            tokens.append('_' + token if token[0].isdigit() else token)
    return head + '/'.join(tokens) if tokens else ''


def _frame(text: str | None) -> str:
    text = (text or '').strip()
    if not text or len(text) > MAX_NAME or any(c.isspace() for c in text) or \
            not text.isascii():
        return ''
    return text.lstrip('/')


def _pose(text: str | None, where: str, notes: _Notes) -> tuple[float, ...]:
    if text is None:
        return (0.0,) * 6
    parts = text.split()
    try:
        values = [float(v) for v in parts]
    except ValueError:
        values = []
    if len(values) != 6 or not all(math.isfinite(v) and abs(v) <= 1e3 for v in values):
        notes.add(where, f'<pose> {_short(text)!r} is not six finite numbers (x y z roll '
                  'pitch yaw, within 1 km); the link\'s origin used')
        return (0.0,) * 6
    return tuple(values)


def _noise(elem: ET.Element | None, where: str, notes: _Notes) -> Gaussian:
    """A ``<noise>`` element (``<type>gaussian</type><mean><stddev>``, or Gazebo Sim's
    ``<noise type="gaussian">``) as Gaussian; other types are noted."""
    if elem is None:
        return Gaussian()
    kind = (elem.get('type') or _text(elem, 'type') or 'gaussian').strip().lower()
    if kind == 'none':
        return Gaussian()
    mean = _number(_text(elem, 'mean'), where, notes, 0.0, -MAX_STD, MAX_STD, 'noise mean')
    std = _number(_text(elem, 'stddev'), where, notes, 0.0, 0.0, MAX_STD, 'noise stddev')
    if kind not in ('gaussian', 'gaussian_quantized'):
        notes.add(where, f'noise type {_short(kind)!r} is not supported; Gaussian noise '
                  f'with mean {mean:g} and stddev {std:g} used')
    elif kind == 'gaussian_quantized':
        notes.add(where, 'gaussian_quantized noise: Gaussian noise without the quantization')
    extra = [t for t in ('bias_mean', 'bias_stddev', 'dynamic_bias_stddev', 'precision')
             if _text(elem, t) not in (None, '0', '0.0')]
    if extra:
        notes.add(where, f'noise {", ".join(extra)} not modelled; only mean and stddev '
                  'applied')
    return Gaussian(mean, std)


def _plugin_name(filename: str | None) -> str:
    base = (filename or '').rsplit('/', 1)[-1]
    if base.startswith('lib'):
        base = base[3:]
    for suffix in ('.so', '.dylib', '.dll'):
        if base.endswith(suffix):
            base = base[:-len(suffix)]
    return base


# --- topic naming -------------------------------------------------------------------------

class _RosNames:
    """A ROS 2 gazebo_ros plugin's names: ``<ros><namespace>`` and ``<remapping>``s
    (``~/out:=scan``), resolved as its node would: ``~/x`` is ``<plugin name>/x``."""

    def __init__(self, plugin: ET.Element, where: str, notes: _Notes) -> None:
        ros = _child(plugin, 'ros')
        self.plugin_name = _name(plugin.get('name') or 'gazebo_ros')
        self.namespace = _topic(_text(ros, 'namespace')) if ros is not None else ''
        self.rules: list[tuple[str, str]] = []
        for elem in (c for c in (ros if ros is not None else ()) if _local(c.tag) in (
                'remapping', 'argument')):
            text = (elem.text or '').strip()
            if _local(elem.tag) == 'argument':
                if text.startswith('__ns:='):
                    self.namespace = _topic(text[len('__ns:='):])
                    continue
                if text.startswith('--ros-args') or text == '-r':
                    continue
            frm, sep, to = text.partition(':=')
            if not sep or not _topic(to):
                notes.add(where, f'<{_local(elem.tag)}> {_short(text)!r} is not from:=to; '
                          'ignored')
                continue
            self.rules.append((frm.strip(), _topic(to)))

    def resolve(self, topic: str) -> str:
        for frm, to in self.rules:
            if frm.startswith('~/'):
                hit = topic == frm
            else:
                hit = topic == frm or topic.endswith('/' + frm)
            if hit:
                topic = to if to.startswith('/') or frm.startswith('~/') \
                    else topic[:len(topic) - len(frm)] + to
                break
        if topic.startswith('~/'):
            topic = f'{self.plugin_name}/{topic[2:]}'
        if topic.startswith('/') or not self.namespace:
            return topic
        return f'{self.namespace}/{topic}'


def _ros1_topic(namespace: str, base: str, topic: str | None) -> str:
    """A ROS 1 plugin's topic: absolute as given, else under ``base`` and the
    ``<robotNamespace>``."""
    topic = _topic(topic)
    if topic.startswith('/'):
        return topic
    topic = f'{base}/{topic}' if base else topic
    return f'{namespace}/{topic}' if namespace else topic


# --- one <sensor> ---------------------------------------------------------------------------

class _SensorReader:
    """One ``<sensor>`` element (either simulator) to a declaration."""

    def __init__(self, elem: ET.Element, link: str, sim: bool, notes: _Notes,
                 taken: set[str]) -> None:
        self.elem = elem
        self.link = link
        self.sim = sim                  # True: Gazebo Sim; False: Gazebo Classic
        self.notes = notes
        self.taken = taken
        self.raw_name = elem.get('name') or elem.get('type') or 'sensor'
        self.where = f'sensor {_short(self.raw_name)} on {_short(link)}'
        self.plugin: ET.Element | None = None     # its ROS plugin (``read``)

    def read(self, kind: str) -> list[SensorDeclaration]:
        elem, notes, where = self.elem, self.notes, self.where
        plugin = _child(elem, 'plugin')
        plugin_kind = None
        if plugin is not None:
            pname = _plugin_name(plugin.get('filename'))
            plugin_kind = PLUGINS.get(pname)
            if plugin_kind is None:
                notes.add(where, f'plugin {_short(plugin.get("filename"))!r} is not known '
                          f'here; the {kind} is published as its type says with default '
                          'names')
                plugin = None
            elif plugin_kind != kind and not (kind in ('depth', 'rgbd') and
                                              plugin_kind == 'camera') \
                    and not (kind == 'camera' and plugin_kind == 'depth'):
                notes.add(where, f'plugin {pname} is for a {plugin_kind}, the sensor is a '
                          f'{kind}; published as a {kind}')
            elif kind == 'camera' and plugin_kind == 'depth':
                kind = 'depth'
        self.plugin = plugin
        if plugin is not None:
            self._unused_plugin_keys(plugin)
        elif not self.sim and _child(elem, 'plugin') is None:
            notes.add(where, 'no ROS plugin: Gazebo Classic publishes it on no ROS topic, '
                      'and neither does sim_node; left out (a gazebo_ros plugin in the '
                      'sensor names its topic)')
            return []
        base = SensorDeclaration(name=self._unique(_name(self.raw_name)), kind=kind,
                                 link=self.link,
                                 source='gazebo_sim' if self.sim else 'gazebo_classic')
        base.pose = _pose(_text(elem, 'pose'), where, notes)
        pose = _child(elem, 'pose')
        if pose is not None and pose.get('relative_to'):
            notes.add(where, '<pose relative_to=...> not followed; the pose is taken in the '
                      'link')
        rate_text = _text(elem, 'update_rate')
        if plugin is not None:      # ROS 1 plugins' own rate, where they read one
            rate_text = _text(plugin, 'updateRate') or _text(plugin, 'updateRateHZ') \
                or rate_text
        if rate_text is None:
            notes.add(where, f'no <update_rate> (Gazebo: every physics step); '
                      f'{DEFAULT_RATE[kind]:g} Hz used')
        top = MAX_CAMERA_RATE if kind in ('camera', 'depth', 'rgbd') else MAX_RATE
        base.rate = _number(rate_text, where, notes, DEFAULT_RATE[kind], 0.0, top,
                            'update_rate')
        if base.rate <= 0:
            base.rate = DEFAULT_RATE[kind]
            notes.add(where, f'update_rate 0 (as fast as Gazebo can): {base.rate:g} Hz used')
        self._frame(base)
        self._unused(kind)
        if kind == 'lidar':
            out = self._lidar(base)
        elif kind in ('camera', 'depth', 'rgbd'):
            out = self._cameras(base)
        elif kind == 'imu':
            out = [self._imu(base)]
        elif kind == 'contact':
            out = [self._contact(base)]
        else:
            out = [self._force_torque(base)]
        for d in out:       # names put together from pieces are ROS names too
            d.topics = {role: _topic(t) or _topic(f'{d.name}/{role}')
                        for role, t in d.topics.items()}
        return out

    def _unique(self, name: str) -> str:
        unique, k = name, 2
        while unique in self.taken:
            unique, k = f'{name}_{k}', k + 1
        self.taken.add(unique)
        return unique

    def _unused_plugin_keys(self, plugin: ET.Element) -> None:
        unused = sorted({_local(c.tag) for c in plugin} - PLUGIN_KEYS)
        if unused:
            self.notes.add(self.where, f'plugin <{">, <".join(_short(u, 30) for u in unused)}'
                           '> not supported; ignored')

    def _unused(self, kind: str) -> None:
        known = HARMLESS | {'ray', 'lidar', 'camera', 'imu', 'contact', 'force_torque',
                            'noise', 'depth_camera'}
        unused = [_local(c.tag) for c in self.elem if _local(c.tag) not in known]
        if unused:
            self.notes.add(self.where, f'<{">, <".join(_short(u, 30) for u in unused)}> not '
                           'supported; ignored')

    def _frame(self, base: SensorDeclaration) -> None:
        p, elem = self.plugin, self.elem
        frame = None
        if p is not None:
            frame = _text(p, 'frame_name') or _text(p, 'frameName') or _text(p, 'frameId') \
                or _text(p, 'frame_id')
        if frame is None and self.sim:
            frame = _text(elem, 'gz_frame_id') or _text(elem, 'ignition_frame_id') \
                or _text(elem, 'frame_id')
            if frame is None:
                self.notes.add(self.where, 'no <gz_frame_id>: Gazebo would stamp '
                               'model::link::sensor; stamped with the link\'s frame '
                               'instead (for images its optical frame)')
        if frame is not None:
            base.frame = _frame(frame)
            if not base.frame:
                self.notes.add(self.where, f'frame {_short(frame)!r} is no frame name; the '
                               'link\'s frame used')

    # --- names ------------------------------------------------------------------------------
    def _classic_topic(self, default: str, ros1_keys: Sequence[str] = (),
                       base: str = '') -> str:
        """The topic a Gazebo Classic plugin publishes ``default`` (its ROS 2 name, e.g.
        ``~/out`` or ``camera/image_raw``) on."""
        p = self.plugin
        if p is None:
            return _RosNames(ET.Element('plugin', name=self.raw_name), '', self.notes
                             ).resolve(default)
        if _child(p, 'ros') is not None or not any(_text(p, k) for k in ros1_keys) and \
                _text(p, 'robotNamespace') is None:
            return _RosNames(p, self.where, self.notes).resolve(default)
        ns = _topic(_text(p, 'robotNamespace'))
        given = next((_text(p, k) for k in ros1_keys if _text(p, k)), None)
        if given is None:
            return _ros1_topic(ns, base, default.rsplit('/', 1)[-1])
        return _ros1_topic(ns, base, given)

    def _sim_topic(self, default: str) -> str:
        topic = _topic(_text(self.elem, 'topic'))
        if topic:
            return topic
        self.notes.add(self.where, f'no <topic>: Gazebo would use a scoped default; '
                       f'{default!r} used')
        return default

    # --- kinds ------------------------------------------------------------------------------
    def _lidar(self, d: SensorDeclaration) -> list[SensorDeclaration]:
        notes, where = self.notes, self.where
        ray = _child(self.elem, 'lidar') if self.sim else None
        ray = ray if ray is not None else _child(self.elem, 'ray')
        if ray is None:
            ray = _child(self.elem, 'lidar')
        if ray is None:
            notes.add(where, 'no <ray> (or <lidar>) scan; a 640-beam 360 degree scan used')
        h = _child(ray, 'scan', 'horizontal')
        v = _child(ray, 'scan', 'vertical')
        d.samples = _count(_text(h, 'samples'), where, notes, 640, MAX_SAMPLES, 'samples')
        d.min_angle = _number(_text(h, 'min_angle'), where, notes, -math.pi, -2 * math.pi,
                              2 * math.pi, 'min_angle')
        d.max_angle = _number(_text(h, 'max_angle'), where, notes, math.pi, -2 * math.pi,
                              2 * math.pi, 'max_angle')
        if _text(h, 'resolution') not in (None, '1', '1.0', '1.000000'):
            notes.add(where, 'horizontal <resolution> other than 1 (interpolated rays) not '
                      'modelled; one ray a sample')
        if d.max_angle - d.min_angle < 1e-6 or d.max_angle - d.min_angle > 2 * math.pi + 1e-6:
            notes.add(where, f'horizontal angles {d.min_angle:g}..{d.max_angle:g} are not an '
                      'interval of at most 360 degrees; -pi..pi used')
            d.min_angle, d.max_angle = -math.pi, math.pi
        d.vertical_samples = _count(_text(v, 'samples'), where, notes, 1, MAX_SAMPLES,
                                    'vertical samples')
        d.vertical_min_angle = _number(_text(v, 'min_angle'), where, notes, 0.0,
                                       -math.pi / 2, math.pi / 2, 'vertical min_angle')
        d.vertical_max_angle = _number(_text(v, 'max_angle'), where, notes, 0.0,
                                       -math.pi / 2, math.pi / 2, 'vertical max_angle')
        if d.vertical_max_angle < d.vertical_min_angle:
            notes.add(where, 'vertical max_angle below min_angle; swapped')
            d.vertical_min_angle, d.vertical_max_angle = d.vertical_max_angle, \
                d.vertical_min_angle
        if d.samples * d.vertical_samples > MAX_RAYS:
            rows = max(1, MAX_RAYS // d.samples)
            notes.add(where, f'{d.samples} x {d.vertical_samples} rays is over {MAX_RAYS} a '
                      f'scan; {rows} vertical samples used')
            d.vertical_samples = rows
        rng = _child(ray, 'range')
        d.range_min = _number(_text(rng, 'min'), where, notes, 0.1, 0.0, MAX_RANGE / 2,
                              'range min')
        d.range_max = _number(_text(rng, 'max'), where, notes, 30.0, 0.0, MAX_RANGE,
                              'range max')
        if d.range_max <= d.range_min:
            notes.add(where, f'range max {d.range_max:g} not above min {d.range_min:g}; '
                      f'{d.range_min:g}..{max(d.range_min + 30.0, 30.0):g} m used')
            d.range_max = max(d.range_min + 30.0, 30.0)
        noise = _noise(_child(ray, 'noise'), where, notes)
        if not noise.off:
            d.noise['range'] = noise
        output = 'scan' if d.vertical_samples == 1 else 'points'
        p = self.plugin
        if self.sim:
            topic = self._sim_topic(d.name)
            d.topics = {'scan': topic} if output == 'scan' else {'points': f'{topic}/points'}
        else:
            pname = _plugin_name(p.get('filename')) if p is not None else ''
            out_type = (_text(p, 'output_type') or '') if p is not None else ''
            if pname == 'gazebo_ros_ray_sensor':
                given = {'sensor_msgs/LaserScan': 'scan', 'sensor_msgs/msg/LaserScan': 'scan',
                         'sensor_msgs/PointCloud2': 'points',
                         'sensor_msgs/msg/PointCloud2': 'points', '': 'points',
                         'sensor_msgs/Range': 'range', 'sensor_msgs/msg/Range': 'range'}.get(
                             out_type, None)
                if given is None:
                    notes.add(where, f'output_type {_short(out_type)!r} is not supported '
                              '(LaserScan, PointCloud2, Range); PointCloud2 used')
                output = given or 'points'
                if output == 'range':      # a sonar or an infrared ranger: the nearest return
                    kind = (_text(p, 'radiation_type') or 'infrared').lower()
                    if kind not in ('infrared', 'ultrasound'):
                        notes.add(where, f'radiation_type {_short(kind)!r}: infrared used')
                        kind = 'infrared'
                    d.radiation = kind
            elif pname in ('gazebo_ros_block_laser', 'gazebo_ros_velodyne_laser',
                           'gazebo_ros_velodyne_gpu_laser'):
                output = 'points'
            elif pname == 'gazebo_ros_range':     # ROS 1 sonars and rangers (TIAGo's)
                output = 'range'
                kind = (_text(p, 'radiation') or 'ultrasound').lower()
                d.radiation = kind if kind in ('infrared', 'ultrasound') else 'ultrasound'
            if output == 'range' and d.vertical_samples > 1:
                pass                  # Range is the nearest return of every ray, rows too
            elif output == 'scan' and d.vertical_samples > 1:
                notes.add(where, f'LaserScan holds one row; the {d.vertical_samples} vertical '
                          'samples go out as PointCloud2 instead')
                output = 'points'
            default = '~/out' if pname in ('gazebo_ros_ray_sensor', '') else \
                ('range' if output == 'range' else 'scan')
            d.topics = {output: self._classic_topic(default, ('topicName',))}
        return [d]

    def _cameras(self, d: SensorDeclaration) -> list[SensorDeclaration]:
        cams = [c for c in self.elem if _local(c.tag) in ('camera', 'depth_camera')]
        if not cams:
            self.notes.add(self.where, 'no <camera>; 640x480 at 60 degrees used')
            cams = [ET.Element('camera')]
        kind = d.kind
        out = []
        for i, cam in enumerate(cams):
            one = d if i == 0 else SensorDeclaration(**{
                **d.to_dict(), 'noise': {}, 'topics': {}, 'collisions': ()})
            one.pose = tuple(d.pose)
            own = cam.get('name')
            if len(cams) > 1 and own:
                one.name = self._unique(_name(f'{self.raw_name}_{own}'))
            elif i > 0:
                one.name = self._unique(_name(f'{self.raw_name}_{i}'))
            cpose = _child(cam, 'pose')
            if cpose is not None and len(cams) > 1:
                one.pose = _compose(d.pose, _pose(cpose.text, self.where, self.notes))
            self._camera(one, cam, own if len(cams) > 1 else None, kind)
            out.append(one)
        return out

    def _camera(self, d: SensorDeclaration, cam: ET.Element, sub: str | None,
                kind: str) -> None:
        notes, where = self.notes, self.where
        image = _child(cam, 'image')
        d.width = _count(_text(image, 'width'), where, notes, 640, MAX_SIDE, 'image width')
        d.height = _count(_text(image, 'height'), where, notes, 480, MAX_SIDE, 'image height')
        if d.width * d.height > MAX_PIXELS:
            scale = math.sqrt(MAX_PIXELS / (d.width * d.height))
            w, h = max(1, int(d.width * scale)), max(1, int(d.height * scale))
            notes.add(where, f'{d.width}x{d.height} is over {MAX_PIXELS} pixels; {w}x{h} used')
            d.width, d.height = w, h
        d.horizontal_fov = _number(_text(cam, 'horizontal_fov'), where, notes, 1.047, 0.01,
                                   3.0, 'horizontal_fov')
        d.near = _number(_text(cam, 'clip', 'near'), where, notes, 0.1, 1e-4, MAX_RANGE,
                         'clip near')
        d.far = _number(_text(cam, 'clip', 'far'), where, notes, 100.0, 1e-3, 1e5,
                        'clip far')
        if d.far <= d.near:
            notes.add(where, f'clip far {d.far:g} not beyond near {d.near:g}; 100 m used')
            d.far = max(100.0, d.near * 10)
        fmt = _text(image, 'format')
        if fmt and fmt.upper() not in ('R8G8B8', 'RGB_INT8', 'B8G8R8', 'BGR_INT8', 'L8',
                                       'L_INT8', 'R_FLOAT32'):
            notes.add(where, f'image format {_short(fmt)!r}: published as rgb8')
        for tag in ('distortion', 'lens'):
            if _child(cam, tag) is not None:
                notes.add(where, f'camera <{tag}> not modelled; an ideal pinhole image')
        unused = sorted({_local(c.tag) for c in cam} - CAMERA_KEYS)
        if unused:
            notes.add(where, f'camera <{">, <".join(_short(u, 30) for u in unused)}> not '
                      'supported; ignored')
        if _child(cam, 'noise') is not None and not _noise(_child(cam, 'noise'), where,
                                                           notes).off:
            notes.add(where, 'image noise not applied; clean pixels')
        if self.sim:
            self._sim_camera_topics(d, cam, kind)
        else:
            self._classic_camera_topics(d, sub, kind)

    def _classic_camera_topics(self, d: SensorDeclaration, sub: str | None,
                               kind: str) -> None:
        p = self.plugin
        name = _topic((_text(p, 'camera_name') or _text(p, 'cameraName'))
                      if p is not None else None) or _topic(self.raw_name)
        if sub:
            name = f'{name}/{_topic(sub)}'
        ros1 = p is not None and _child(p, 'ros') is None and any(
            _text(p, k) for k in ('imageTopicName', 'cameraInfoTopicName',
                                  'depthImageTopicName', 'pointCloudTopicName',
                                  'robotNamespace'))
        roles = {'image': ('image_raw', 'imageTopicName'),
                 'info': ('camera_info', 'cameraInfoTopicName')}
        if kind != 'camera':
            roles.update({'depth': ('depth/image_raw', 'depthImageTopicName'),
                          'depth_info': ('depth/camera_info', 'depthImageCameraInfoTopicName'),
                          'points': ('points', 'pointCloudTopicName')})
        for role, (default, key) in roles.items():
            if ros1:
                ns = _topic(_text(p, 'robotNamespace'))
                d.topics[role] = _ros1_topic(ns, name, _text(p, key) or default)
            else:
                d.topics[role] = self._classic_topic(f'{name}/{default}')

    def _sim_camera_topics(self, d: SensorDeclaration, cam: ET.Element, kind: str) -> None:
        topic = self._sim_topic(d.name)
        info = _topic(_text(cam, 'camera_info_topic'))
        if kind == 'rgbd':
            d.topics = {'image': f'{topic}/image', 'depth': f'{topic}/depth_image',
                        'points': f'{topic}/points', 'info': info or f'{topic}/camera_info'}
            d.topics['depth_info'] = d.topics['info']
            return
        parent = topic.rsplit('/', 1)[0] if '/' in topic.lstrip('/') else topic
        info = info or f'{parent}/camera_info'
        if kind == 'depth':
            d.topics = {'depth': topic, 'depth_info': info, 'points': f'{topic}/points',
                        'info': info}
            return
        d.topics = {'image': topic, 'info': info}

    def _imu(self, d: SensorDeclaration) -> SensorDeclaration:
        notes, where = self.notes, self.where
        imu = _child(self.elem, 'imu')
        for role, tag in (('gyro', 'angular_velocity'), ('accel', 'linear_acceleration')):
            axes = [_noise(_child(imu, tag, axis, 'noise'), where, notes)
                    for axis in ('x', 'y', 'z')]
            worst = max(axes, key=lambda g: g.stddev)
            if len({(g.mean, g.stddev) for g in axes}) > 1:
                notes.add(where, f'{tag} noise differs per axis; stddev {worst.stddev:g} '
                          f'and mean {worst.mean:g} used on every axis')
            if not worst.off:
                d.noise[role] = worst
        p = self.plugin
        if p is not None:      # ROS 1 plugins: <gaussianNoise>, hector's per-quantity ones
            for role, keys in (('accel', ('accelGaussianNoise', 'gaussianNoise')),
                               ('gyro', ('rateGaussianNoise', 'gaussianNoise'))):
                for key in keys:
                    text = _text(p, key)
                    if text is not None and role not in d.noise:
                        std = _number(text.split()[0], where, notes, 0.0, 0.0, MAX_STD, key)
                        if std:
                            d.noise[role] = Gaussian(0.0, std)
            body = _text(p, 'bodyName')
            if body and body != self.link:
                notes.add(where, f'<bodyName> {_short(body)!r}: the IMU sits on the link of '
                          f'the <gazebo reference>, {_short(self.link)!r}')
            initial = _text(p, 'initial_orientation_as_reference')
            if _plugin_name(p.get('filename')) == 'gazebo_ros_imu_sensor' and \
                    initial not in ('false', '0'):
                notes.add(where, 'initial_orientation_as_reference '
                          f'{"true" if initial else "not given (Gazebo: true)"}: orientation '
                          'is given in the world frame instead (the same while the robot '
                          'starts level, facing +x)')
        if self.sim:
            d.topics = {'imu': self._sim_topic(d.name)}
        else:
            pname = _plugin_name(p.get('filename')) if p is not None else ''
            default = '~/out' if pname in ('gazebo_ros_imu_sensor', '') else 'imu'
            d.topics = {'imu': self._classic_topic(default, ('topicName',))}
        return d

    def _contact(self, d: SensorDeclaration) -> SensorDeclaration:
        contact = _child(self.elem, 'contact')
        d.collisions = tuple(_short(c.text.strip(), MAX_NAME) for c in (contact or ())
                             if _local(c.tag) == 'collision' and c.text and c.text.strip())
        self.notes.add(self.where, 'contacts reported as mujoco_hal_ros/Touch (in contact, '
                       'total normal force) on the link\'s geometry: gazebo_msgs/'
                       'ContactsState is not available')
        if self.sim:
            d.topics = {'contact': _topic(_text(contact, 'topic')) or
                        self._sim_topic(d.name)}
        else:
            d.topics = {'contact': self._classic_topic('bumper_states',
                                                       ('bumperTopicName',))}
        return d

    def _force_torque(self, d: SensorDeclaration) -> SensorDeclaration:
        p = self.plugin
        if p is not None:
            for key in ('gaussian_noise', 'gaussianNoise'):
                text = _text(p, key)
                if text is not None:
                    std = _number(text, self.where, self.notes, 0.0, 0.0, MAX_STD, key)
                    if std:
                        d.noise['force'] = d.noise['torque'] = Gaussian(0.0, std)
        ft = _child(self.elem, 'force_torque')
        frame = _text(ft, 'frame') or 'child'
        if frame not in ('child', 'sensor'):
            self.notes.add(self.where, f'force_torque <frame>{_short(frame)}: measured in '
                           'the child link\'s frame instead')
        direction = _text(ft, 'measure_direction') or 'child_to_parent'
        if direction not in ('child_to_parent', 'parent_to_child'):
            self.notes.add(self.where, f'force_torque <measure_direction>{_short(direction)}'
                           ' is neither child_to_parent nor parent_to_child; '
                           'child_to_parent (Gazebo\'s default) used')
            direction = 'child_to_parent'
        d.measure_direction = direction
        if self.sim:
            d.topics = {'wrench': self._sim_topic(d.name)}
        else:
            pname = _plugin_name(p.get('filename')) if p is not None else ''
            default = '~/out' if pname in ('gazebo_ros_ft_sensor', '') else 'wrench'
            d.topics = {'wrench': self._classic_topic(default, ('topicName',))}
        return d


def _compose(a: Sequence[float], b: Sequence[float]) -> tuple[float, ...]:
    """Pose ``b`` (x y z r p y) expressed in pose ``a``, as x y z r p y."""
    ra, rb = _rpy_matrix(a[3:]), _rpy_matrix(b[3:])
    pos = [a[i] + sum(ra[i][k] * b[k] for k in range(3)) for i in range(3)]
    r = [[sum(ra[i][k] * rb[k][j] for k in range(3)) for j in range(3)] for i in range(3)]
    pitch = math.asin(max(-1.0, min(1.0, -r[2][0])))
    roll = math.atan2(r[2][1], r[2][2])
    yaw = math.atan2(r[1][0], r[0][0])
    return tuple(pos) + (roll, pitch, yaw)


def _rpy_matrix(rpy: Sequence[float]) -> list[list[float]]:
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = (math.cos(r), math.sin(r), math.cos(p), math.sin(p),
                              math.cos(y), math.sin(y))
    return [[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr]]


# --- ros2_control ---------------------------------------------------------------------------

def _ros2_control(root: ET.Element, links: Collection[str | None], notes: _Notes,
                  taken: set[str]) -> list[SensorDeclaration]:
    out = []
    for block in (c for c in root if _local(c.tag) == 'ros2_control'):
        for sensor in (c for c in block if _local(c.tag) == 'sensor'):
            raw = sensor.get('name') or 'sensor'
            where = f'ros2_control sensor {_short(raw)}'
            ifaces = {(s.get('name') or '') for s in sensor if _local(s.tag) ==
                      'state_interface'}
            params = {p.get('name'): (p.text or '').strip() for p in sensor
                      if _local(p.tag) == 'param'}
            prefixes = {i.split('.', 1)[0] for i in ifaces}
            if prefixes & {'orientation', 'angular_velocity', 'linear_acceleration'}:
                kind, topic = 'imu', 'imu'
            elif prefixes & {'force', 'torque'}:
                kind, topic = 'force_torque', 'wrench'
            else:
                notes.add(where, f'state interfaces {_short(", ".join(sorted(ifaces)))} are '
                          'neither an IMU nor a force-torque sensor; left out')
                continue
            frame = _frame(params.get('frame_id', '')) or _frame(params.get('sensor_name', ''))
            link = frame if frame in links else ''
            if not link:
                notes.add(where, f'frame_id {_short(params.get("frame_id"))!r} is no link of '
                          'the URDF; left out (give <param name="frame_id"> a link)')
                continue
            name = _name(raw)
            unique, k = name, 2
            while unique in taken:
                unique, k = f'{name}_{k}', k + 1
            taken.add(unique)
            out.append(SensorDeclaration(
                name=unique, kind=kind, link=link, source='ros2_control', frame=frame,
                rate=DEFAULT_RATE[kind], topics={topic: _topic(f'sensors/{unique}')}))
    return out


# --- the whole description ------------------------------------------------------------------

def parse(root: ET.Element) -> tuple[list[SensorDeclaration], list[str]]:
    """The sensors of a URDF ``<robot>`` element and one note per thing not used."""
    notes = _Notes()
    links = {ln.get('name') for ln in root if _local(ln.tag) == 'link' and ln.get('name')}
    joints = {}
    for j in (c for c in root if _local(c.tag) == 'joint'):
        child = _child(j, 'child')
        if j.get('name') and child is not None and child.get('link'):
            joints[j.get('name')] = child.get('link')
    taken: set = set()
    decls: list[SensorDeclaration] = []
    for gz in (c for c in root if _local(c.tag) == 'gazebo'):
        ref = gz.get('reference')
        sensors = [c for c in gz if _local(c.tag) == 'sensor']
        others = [c for c in gz if _local(c.tag) not in ('sensor',)]
        model_imus = [c for c in others if _local(c.tag) == 'plugin' and
                      _plugin_name(c.get('filename')) in MODEL_IMU_PLUGINS]
        _other_tags(ref, [c for c in others if not any(c is m for m in model_imus)], notes)
        for plugin in model_imus:
            if len(decls) < MAX_SENSORS:
                decls.extend(_model_imu(plugin, ref, links, notes, taken))
        for elem in sensors:
            where = f'sensor {_short(elem.get("name") or elem.get("type"))}'
            if ref is None:
                notes.add(where, 'outside a <gazebo reference="link">: Gazebo attaches it to '
                          'no link either; left out')
                continue
            kind_type = (elem.get('type') or '').strip()
            link = ref if ref in links else None
            if link is None and ref in joints:
                link = joints[ref]         # a force-torque sensor names its joint
            if link is None:
                notes.add(where, f'reference {_short(ref)!r} is no link (or joint) of the '
                          'URDF; left out')
                continue
            if len(decls) >= MAX_SENSORS:
                notes.add(where, f'more than {MAX_SENSORS} sensors; left out')
                continue
            sim = _is_gazebo_sim(elem)
            kind = (SIM_TYPES if sim else CLASSIC_TYPES).get(kind_type)
            if kind is None:
                notes.add(where, f'type {_short(kind_type)!r} is not supported (lidars, '
                          'cameras, depth, IMU, contact, force-torque); left out')
                continue
            if kind == 'force_torque' and ref in links and ref not in joints:
                notes.add(where, 'force_torque on a link: measured at the joint that holds '
                          'the link')
            reader = _SensorReader(elem, link, sim, notes, taken)
            decls.extend(reader.read(kind))
    decls.extend(_ros2_control(root, links, notes, taken)[:max(0, MAX_SENSORS - len(decls))])
    return decls, notes.lines


MODEL_IMU_PLUGINS = ('gazebo_ros_imu', 'hector_gazebo_ros_imu')


def _model_imu(plugin: ET.Element, ref: str | None, links: Collection[str | None],
               notes: _Notes, taken: set[str]) -> list[SensorDeclaration]:
    """A ROS 1 model plugin IMU (``libgazebo_ros_imu.so``, hector's): on ``<bodyName>``
    (or the reference link), ``<topicName>``, ``<frameName>``/``<frameId>``,
    ``<updateRate>``, ``<gaussianNoise>``."""
    body = _text(plugin, 'bodyName') or _text(plugin, 'frameName') or \
        _text(plugin, 'frameId') or ref
    where = f'plugin {_short(plugin.get("name") or plugin.get("filename"))}'
    if body is None or body not in links:     # (links have names)
        notes.add(where, f'<bodyName> {_short(body)!r} is no link of the URDF; left out')
        return []
    elem = ET.Element('sensor', name=plugin.get('name') or 'imu', type='imu')
    elem.append(plugin)
    reader = _SensorReader(elem, body, False, notes, taken)
    return reader.read('imu')


def parse_text(urdf: str) -> tuple[list[SensorDeclaration], list[str]]:
    """``parse`` on URDF text; text that is no XML gives no sensors and one note."""
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as err:
        return [], [f'robot_description: not XML ({err}); no sensors read']
    return parse(root)


def _is_gazebo_sim(elem: ET.Element) -> bool:
    """Gazebo Sim tags: a ``<topic>`` or ``gz_frame_id``, a ``<lidar>`` block or a type
    Classic lacks; ``libgazebo_ros_*`` plugins mean Classic."""
    plugin = _child(elem, 'plugin')
    if plugin is not None and _plugin_name(plugin.get('filename')) in PLUGINS:
        return False
    if (elem.get('type') or '') not in CLASSIC_TYPES:
        return True
    return any(_child(elem, t) is not None for t in ('topic', 'gz_frame_id',
                                                     'ignition_frame_id', 'lidar'))


# Gazebo Sim systems that only make its sensors run (sim_node runs its own)
SIM_SYSTEMS = {f'gz-sim-{name}-system' for name in ('sensors', 'imu', 'contact',
                                                    'forcetorque', 'navsat', 'magnetometer',
                                                    'air-pressure', 'altimeter')}
SIM_SYSTEMS |= {f'gz-sim{v}-{name}-system' for v in range(6, 10)
                for name in ('sensors', 'imu', 'contact', 'forcetorque')}
# Tags of <gazebo reference> that only Gazebo's physics or looks read
_SURFACE = {'material', 'mu1', 'mu2', 'kp', 'kd', 'fdir1', 'maxVel', 'minDepth',
            'selfCollide', 'gravity', 'turnGravityOff', 'maxContacts', 'dampingFactor',
            'provideFeedback', 'implicitSpringDamper', 'stopCfm', 'stopErp',
            'disableFixedJointLumping', 'preserveFixedJoint', 'visual', 'collision',
            'static', 'laserRetro', 'springReference', 'springStiffness', 'cfmDamping'}


# The diff-drive plugins ``mobile.gazebo_drive`` serves (and notes) itself: named here, where
# the description is read, so the drive module below imports them (not the other way round)
DIFF_DRIVE_CLASSIC = ('libgazebo_ros_diff_drive.so',)
DIFF_DRIVE_GZ_SIM = ('gz-sim-diff-drive-system', 'ignition-gazebo-diff-drive-system',
                     'libgz-sim-diff-drive-system.so', 'libignition-gazebo-diff-drive-system.so')


def _is_drive(plugin: ET.Element) -> bool:
    """A diff-drive plugin ``mobile.gazebo_drive`` serves (and notes) itself."""
    name = plugin.get('filename', '') or ''
    return name in DIFF_DRIVE_CLASSIC + DIFF_DRIVE_GZ_SIM or \
        plugin.get('name', '') in DIFF_DRIVE_GZ_SIM or 'DiffDrive' in name


def _other_tags(ref: str | None, elems: Iterable[ET.Element], notes: _Notes) -> None:
    """One note for what a ``<gazebo>`` element holds besides sensors."""
    surface = sorted({_local(e.tag) for e in elems if _local(e.tag) in _SURFACE})
    where = f'<gazebo reference="{_short(ref)}">' if ref else '<gazebo>'
    if surface:
        notes.add(where, f'<{">, <".join(surface)}> not applied (MuJoCo\'s own contact, '
                  'friction and looks)')
    for plugin in (e for e in elems if _local(e.tag) == 'plugin'):
        pname = _plugin_name(plugin.get('filename'))
        if pname in ('gazebo_ros2_control', 'gz_ros2_control-system',
                     'ign_ros2_control-system', 'gazebo_ros_control'):
            continue              # sim_node is the ros2_control hardware itself
        if pname.replace('ignition-gazebo', 'gz-sim').replace('libgz', 'gz') in SIM_SYSTEMS:
            continue              # what makes Gazebo Sim's sensors work: sim_node's own
        if _is_drive(plugin):
            continue              # served, with its own notes (mobile.gazebo_drive)
        notes.add(where, f'plugin {_short(plugin.get("filename") or "?")} not run: '
                  'sim_node serves joints, drives and state through its own interfaces')
    rest = sorted({_local(e.tag) for e in elems if _local(e.tag) not in _SURFACE | {
        'plugin', 'sensor'}})
    if rest:
        notes.add(where, f'<{">, <".join(_short(r, 30) for r in rest)}> not supported; '
                  'ignored')
