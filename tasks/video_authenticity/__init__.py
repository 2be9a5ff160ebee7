"""Video authenticity (VidGuard-R1): is a clip real or generated? Work in progress; see README.md.

Present: the rewards (rewards/video.py), the GRPO-TA perturbation sampler (`perturb`), the JSONL
manifest reader (manifest.py) and the decode-once clip loader (decode.py). Not yet a task under the
contract of vlrl/task.py (no Config / make_env / report): README.md lists what remains.
"""

from tasks.video_authenticity.perturb import perturb

__all__ = ["perturb"]
