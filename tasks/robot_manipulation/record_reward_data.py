"""Record a VLA's own rollouts beside the scripted expert's as reward-model data.

The recording itself is rewards/learned/sim_data.py (any ``obs -> action`` callable); this CLI adds
the VLA: a checkpoint loaded through policy.py, so it acts with the task's prompt and action decoding.

    python -m tasks.robot_manipulation.record_reward_data --task Lift --seeds 1000-1029 \
        --kinds expert,policy --policy assets/tiny-vla-lift --out runs/rewards/lift84_policy.npz
"""

from __future__ import annotations

import time

from rewards.learned import sim_data

from .policy import load_policy


def main(argv: list[str] | None = None) -> dict:
    p = sim_data.arg_parser("record a VLA's rollouts (kind 'policy') + expert episodes for reward models")
    p.set_defaults(kinds="expert,policy")
    p.add_argument("--policy", required=True, help="VLA checkpoint directory for kind 'policy'")
    p.add_argument("--policy-camera", default="robot0_eye_in_hand")
    p.add_argument("--policy-image-size", type=int, default=112)
    p.add_argument("--policy-temperature", type=float, default=0.25, help="0 = greedy")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    # Loaded before any simulator exists (load_policy: torch extensions after a MuJoCo EGL context can crash).
    policy = load_policy(a.policy, camera=a.policy_camera, image_size=a.policy_image_size,
                         temperature=a.policy_temperature or 1.0, greedy=a.policy_temperature == 0, threads=1)
    return sim_data.record(a, policy, t0)


if __name__ == "__main__":
    main()
