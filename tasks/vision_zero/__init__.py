"""Vision-Zero "Who is the spy" self-play: work in progress; see README.md.

Present: the Iterative-SPO phase schedules (`phase`, fixed; `next_state`, adaptive) in schedule.py,
the image-pair generators in `tasks.vision_zero.pairs` (imported on demand: they load matplotlib or
MuJoCo), the rewards in rewards/vision_zero.py and the role baselines in vlrl/algos/roles.py.
Not yet a task under the contract of vlrl/task.py (no Config / make_env / report): README.md lists
what remains.
"""

from tasks.vision_zero.schedule import DecisionStats, SwitchConfig, SwitchState, next_state, phase

__all__ = ["DecisionStats", "SwitchConfig", "SwitchState", "next_state", "phase"]
