"""CLEVR-like 3-D scene pairs rendered offscreen with MuJoCo: k objects replaced in place.

A scene holds 3-8 objects on a grey floor, each a shape x colour x material x size (`SHAPES`,
`COLOURS`, `MATERIALS`, `SIZES`) at a floor position with a yaw. The modified scene replaces k objects
(default 2) by objects differing in at least one attribute, at the same floor position and yaw.

Rendering: one fixed oblique camera, a headlight and one directional light, *no shadows and no
reflections*: with those, every pixel belongs to one object or to the floor, so a replaced object
changes only pixels inside its own silhouettes (before or after; what it occluded is inside the
former). MuJoCo's segmentation pass gives each object's visible pixels. A scene is redrawn (up to
`tries` times) unless every object shows at least `min_pixels` pixels in both images and every
replacement changes at least `min_pixels` pixels, so each recorded difference can be seen.

Record (the scene graph of both images):
    {"generator": "clevr", "seed", "size": [W, H], "camera": {"pos", "xyaxes", "fovy"},
     "objects": [obj...], "modified_objects": [obj...], "changed": [i...],
     "changes": [{"index", "attributes": [names that differ], "box": [x0, y0, x1, y1]}]}
    obj = {"shape", "colour", "material", "size", "position": [x, y, z], "yaw", "pixels",
           "pixel_box": [x0, y0, x1, y1] | None (visible silhouette), "pixel_center": [u, v] (projected centre)}
A change's box is the union of the object's silhouettes in both images, grown by `PAD` pixels
(multisample antialiasing blends silhouette edges with their neighbours).

MUJOCO_GL is chosen by robots/gl.py before mujoco is first imported (EGL, else osmesa).
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, replace

import numpy as np

from robots.gl import configure_gl, gl_context_made
from tasks.vision_zero.pairs import Pair, mask_box

SHAPES = ("cube", "sphere", "cylinder")
COLOURS = {"gray": (87, 87, 87), "red": (173, 35, 35), "blue": (42, 75, 215), "green": (29, 105, 20),
           "brown": (129, 74, 25), "purple": (129, 38, 192), "cyan": (41, 208, 208), "yellow": (255, 238, 51)}
MATERIALS = {"rubber": (0.0, 0.0), "metal": (1.0, 0.9)}  # (specular, shininess); reflectance is always 0
SIZES = {"small": 0.35, "large": 0.7}  # a sphere's radius; cubes and cylinders are scaled to look alike
ATTRIBUTES = ("shape", "colour", "material", "size")
CAMERA = {"pos": [0.0, -6.0, 6.5], "xyaxes": [1.0, 0.0, 0.0, 0.0, 0.7348, 0.6783], "fovy": 45.0}  # looks at the origin
AREA = 3.0  # object centres lie in [-AREA, AREA]^2
MIN_DISTANCE = 1.6  # between centres: two large objects never touch (largest footprint radius 0.75)
PAD = 2


@dataclass(frozen=True)
class SceneObject:
    shape: str
    colour: str
    material: str
    size: str
    x: float
    y: float
    yaw: float  # degrees about the vertical axis

    def half_extents(self) -> tuple[float, float, float]:
        """Half sizes (x, y, z) in the object's frame; z is also the height of its centre."""
        s = SIZES[self.size]
        if self.shape == "cube":
            return (0.75 * s,) * 3
        if self.shape == "cylinder":
            return (0.8 * s,) * 3
        return (s,) * 3

    def geom_xml(self, name: str) -> str:
        hx, hy, hz = self.half_extents()
        size = {"cube": f"{hx} {hy} {hz}", "sphere": f"{hx}", "cylinder": f"{hx} {hz}"}[self.shape]
        mj_type = {"cube": "box", "sphere": "sphere", "cylinder": "cylinder"}[self.shape]
        return (f'<geom name="{name}" type="{mj_type}" size="{size}" pos="{self.x} {self.y} {hz}" '
                f'euler="0 0 {self.yaw}" material="{self.colour}_{self.material}"/>')

    def attributes(self) -> tuple[str, str, str, str]:
        return self.shape, self.colour, self.material, self.size


def _pick(rng: np.random.Generator, options) -> str:
    options = list(options)
    return options[int(rng.integers(len(options)))]


def random_scene(rng: np.random.Generator, num_objects: int) -> list[SceneObject]:
    """`num_objects` random objects at least MIN_DISTANCE apart (rejection sampling)."""
    objects: list[SceneObject] = []
    for _ in range(2000):
        if len(objects) == num_objects:
            return objects
        x, y = (float(v) for v in np.round(rng.uniform(-AREA, AREA, 2), 3))
        if all(math.hypot(x - o.x, y - o.y) >= MIN_DISTANCE for o in objects):
            objects.append(SceneObject(_pick(rng, SHAPES), _pick(rng, COLOURS), _pick(rng, MATERIALS),
                                       _pick(rng, SIZES), x, y, float(round(rng.uniform(0, 90), 1))))
    raise ValueError(f"could not place {num_objects} objects {MIN_DISTANCE} apart in the area")


def replace_objects(rng: np.random.Generator, objects: list[SceneObject], k: int) -> tuple[list[SceneObject], list[int]]:
    """A copy with k objects (chosen at random) replaced by ones differing in >= 1 attribute, in place."""
    idx = sorted(int(i) for i in rng.choice(len(objects), size=k, replace=False))
    out = list(objects)
    for i in idx:
        old = objects[i]
        while True:
            new = replace(old, shape=_pick(rng, SHAPES), colour=_pick(rng, COLOURS),
                          material=_pick(rng, MATERIALS), size=_pick(rng, SIZES))
            if new.attributes() != old.attributes():
                break
        out[i] = new
    return out, idx


def scene_xml(objects: list[SceneObject], width: int, height: int) -> str:
    """The MJCF of a scene: floor, lights without shadows, the camera, one geom per object (named o<i>)."""
    materials = "".join(
        f'<material name="{c}_{m}" rgba="{r / 255:.4f} {g / 255:.4f} {b / 255:.4f} 1" specular="{sp}" '
        f'shininess="{sh}" reflectance="0"/>'
        for c, (r, g, b) in COLOURS.items() for m, (sp, sh) in MATERIALS.items())
    geoms = "".join(o.geom_xml(f"o{i}") for i, o in enumerate(objects))
    cam = CAMERA
    return f"""<mujoco>
  <visual><global offwidth="{width}" offheight="{height}"/><quality offsamples="4" shadowsize="0"/>
    <headlight ambient=".35 .35 .35" diffuse=".35 .35 .35" specular=".1 .1 .1"/></visual>
  <asset><material name="floor" rgba=".6 .6 .6 1" specular="0" shininess="0" reflectance="0"/>{materials}</asset>
  <worldbody>
    <light directional="true" pos="2 -3 6" dir="-.3 .4 -1" diffuse=".6 .6 .6" specular=".4 .4 .4" castshadow="false"/>
    <camera name="main" pos="{' '.join(map(str, cam['pos']))}" xyaxes="{' '.join(map(str, cam['xyaxes']))}" fovy="{cam['fovy']}"/>
    <geom name="floor" type="plane" size="30 30 .1" material="floor"/>{geoms}
  </worldbody>
</mujoco>"""


def project(points: np.ndarray, width: int, height: int) -> np.ndarray:
    """World points [P, 3] -> pixel coordinates [P, 2] (u right, v down, top-left origin) of `CAMERA`."""
    pos = np.array(CAMERA["pos"])
    x_axis = np.array(CAMERA["xyaxes"][:3])
    y_axis = np.array(CAMERA["xyaxes"][3:])
    x_axis, y_axis = x_axis / np.linalg.norm(x_axis), y_axis / np.linalg.norm(y_axis)
    z_axis = np.cross(x_axis, y_axis)  # MuJoCo cameras look along their -z
    rel = np.asarray(points, float) - pos
    xc, yc, zc = rel @ x_axis, rel @ y_axis, rel @ z_axis
    f = 0.5 * height / math.tan(math.radians(CAMERA["fovy"]) / 2)
    return np.stack([width / 2 + f * xc / -zc, height / 2 - f * yc / -zc], axis=1)


def render_scene(objects: list[SceneObject], width: int = 320, height: int = 240) -> tuple[np.ndarray, np.ndarray]:
    """RGB image [H, W, 3] uint8 and visible-pixel masks [n, H, W] bool, one per object."""
    chosen = configure_gl()
    import mujoco  # noqa: PLC0415  (after configure_gl: mujoco reads MUJOCO_GL at import)

    gl = sys.modules.get("mujoco.rendering.classic.gl_context")
    if getattr(gl, "_MUJOCO_GL", chosen) != chosen:  # too late to switch: say so rather than fail in GLFW
        raise RuntimeError(f"mujoco was imported with MUJOCO_GL={gl._MUJOCO_GL!r} before render_scene chose "
                           f"{chosen!r}: set MUJOCO_GL (egl or osmesa) or call robots.gl.configure_gl() first")

    model = mujoco.MjModel.from_xml_string(scene_xml(objects, width, height))
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    renderer = mujoco.Renderer(model, height, width)
    gl_context_made()  # its first context registers eglTerminate: live robot envs must close before it
    try:
        renderer.update_scene(data, camera="main")
        image = renderer.render().copy()
        renderer.enable_segmentation_rendering()
        renderer.update_scene(data, camera="main")
        seg = renderer.render()
    finally:
        renderer.close()
    geom_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f"o{i}") for i in range(len(objects))]
    is_geom = seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM)
    masks = np.stack([is_geom & (seg[..., 0] == g) for g in geom_ids]) if objects else np.zeros((0, height, width), bool)
    return image, masks


def _object_record(o: SceneObject, mask: np.ndarray, width: int, height: int) -> dict:
    z = o.half_extents()[2]
    d = asdict(o)
    x, y = d.pop("x"), d.pop("y")
    center = project(np.array([[x, y, z]]), width, height)[0]
    return {**d, "position": [x, y, z], "pixels": int(mask.sum()), "pixel_box": mask_box(mask),
            "pixel_center": [round(float(center[0]), 2), round(float(center[1]), 2)]}


def dilate(mask: np.ndarray, pad: int) -> np.ndarray:
    """`mask` dilated by a (2 pad + 1)-pixel square."""
    out = mask.copy()
    h, w = mask.shape
    for dy in range(-pad, pad + 1):
        for dx in range(-pad, pad + 1):
            out[max(0, dy):h + min(0, dy), max(0, dx):w + min(0, dx)] |= \
                mask[max(0, -dy):h - max(0, dy), max(0, -dx):w - max(0, dx)]
    return out


def clevr_pair(seed: int, num_objects: int | None = None, k: int = 2, width: int = 320, height: int = 240,
               min_pixels: int = 30, tries: int = 20) -> Pair:
    """A rendered scene and the same scene with k objects replaced, from `seed` alone.

    Args: num_objects: 3-8, random when None; k: objects replaced (1 <= k <= num_objects);
    min_pixels: the least visible pixels per object, and changed pixels per replacement.
    """
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9)) if num_objects is None else num_objects
    if not 3 <= n <= 8:
        raise ValueError(f"num_objects must be in [3, 8], got {n!r}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, num_objects = {n}], got {k!r}")
    for _ in range(tries):
        objects = random_scene(rng, n)
        modified, idx = replace_objects(rng, objects, k)
        img_a, masks_a = render_scene(objects, width, height)
        img_b, masks_b = render_scene(modified, width, height)
        if min(masks_a.sum(axis=(1, 2)).min(), masks_b.sum(axis=(1, 2)).min()) < min_pixels:
            continue
        diff = np.any(img_a != img_b, axis=-1)
        regions = [dilate(masks_a[i] | masks_b[i], PAD) for i in idx]
        if min(int((diff & r).sum()) for r in regions) < min_pixels:
            continue
        changes = [{"index": i, "box": mask_box(r),
                    "attributes": [a for a, u, v in zip(ATTRIBUTES, objects[i].attributes(), modified[i].attributes())
                                   if u != v]} for i, r in zip(idx, regions)]
        record = {"generator": "clevr", "seed": int(seed), "size": [width, height], "camera": CAMERA,
                  "objects": [_object_record(o, m, width, height) for o, m in zip(objects, masks_a)],
                  "modified_objects": [_object_record(o, m, width, height) for o, m in zip(modified, masks_b)],
                  "changed": idx, "changes": changes}
        return Pair(img_a, img_b, record)
    raise ValueError(f"no scene with every object and change visible (>= {min_pixels} px) in {tries} tries")
