"""The game env, its rewards per role, the clue language, the self-play schedule and the viewer."""

import math

import pytest

from rewards.vision_zero import NA
from tasks.vision_zero import Config, make_env, report, required_max_turns, role_schedule, roles, score_episodes
from tasks.vision_zero.language import description, false_clues, is_true, phrases, reference_decision
from tasks.vision_zero.pairs.grid import grid_pair
from tasks.vision_zero.selfplay import alarm
from vlrl.rollout import run_episodes
from vlrl.rollout.sample import Sample


class ScriptEngine:
    """Plays from a function of the prompt text; records every call's size."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def generate(self, observations, n=1, greedy=False):
        self.calls.append(len(observations) * n)
        return [[Sample([1], [-1.0], self.answer(o, j), True) for j in range(n)] for o in observations]


def truthful(obs, j):
    """Civilians and the spy state a fresh true phrase of their own image; deciders name the spy."""
    info = obs.info
    if info["stage"] == "decision":
        return f"\\boxed{{{info['spy'] + 1}}}"
    said = obs.messages[0]["content"][1]["text"]
    own = phrases(info["record"], info["player"] == info["spy"])
    fresh = [p for p in own if f": {p}\n" not in said + "\n"]
    return f"\\boxed{{{fresh[0] if fresh else own[0]}}}"


def play(cfg, seeds, answer=truthful):
    engine = ScriptEngine(answer)
    eps = run_episodes(engine, lambda: make_env(cfg, "eval"), seeds, 1, required_max_turns(cfg))
    score_episodes(eps, cfg)
    return eps, engine


def test_observer_game_turns_roles_and_rewards():
    cfg = Config(players=4, rounds=2, observer_samples=3)
    eps, engine = play(cfg, [0, 1, 2])
    # 8 clue turns (one call each, 3 games) and one observer call of 3 games x 3 samples
    assert engine.calls == [3] * 8 + [9]
    for ep in eps:
        game = ep.turns[-1].info["game"]
        spy = game["spy"]
        assert len(ep.turns) == 11 and ep.turns[-1].done
        assert [t.observation.role for t in ep.turns[:4]] == ["spy" if p == spy else "civilian" for p in range(4)]
        assert [t.observation.role for t in ep.turns[8:]] == ["observer"] * 3
        assert game["votes"][spy] == 3 and game["caught"]
        assert all(t.rewards["decision"] == pytest.approx(2.49) for t in ep.turns[8:])
        # zero-sum clue rewards (beta = lam = 0.1, 3 votes for the spy): spy -0.3, civilians +0.1 each
        assert sum(game["player_rewards"]) == pytest.approx(0.0, abs=1e-12)
        assert game["player_rewards"][spy] == pytest.approx(-0.3)
        assert game["player_rewards"][(spy + 1) % 4] == pytest.approx(0.1)
        clue = [t.rewards["clue"] for t in ep.turns[:8]]
        assert clue == pytest.approx([game["player_rewards"][t % 4] - 0.3 * (not c["ok"])
                                      for t, c in enumerate(game["clues"])])
    rep = report(eps, cfg)
    assert rep["overall"] == 1.0 and rep["count"] == 3


def test_vote_mode_every_civilian_votes_in_turn():
    cfg = Config(players=3, rounds=1, decision="vote")
    eps, engine = play(cfg, [5], answer=lambda o, j: "\\boxed{N/A}" if o.info["stage"] == "decision" else truthful(o, j))
    ep = eps[0]
    game = ep.turns[-1].info["game"]
    voters = [t.observation.info["player"] for t in ep.turns[3:]]
    assert voters == [p for p in range(3) if p != game["spy"]] and engine.calls == [1, 1, 1, 1, 1]
    assert [t.observation.role for t in ep.turns[3:]] == ["voter", "voter"]
    assert all(t.rewards["decision"] == pytest.approx(-0.3) for t in ep.turns[3:])  # N/A
    assert game["votes"] == [0, 0, 0] and not game["caught"]
    assert report(eps, cfg)["breakdown"]["na_rate"] == 1.0


def test_format_failures_are_counted_and_penalised():
    cfg = Config(players=3, rounds=2, observer_samples=1)
    answers = iter(["\\boxed{there is a red circle}", "no box here", "\\boxed{There is a RED circle!}",
                    "\\boxed{a} \\boxed{b}", "\\boxed{It is red. It is big.}", "\\boxed{}", "\\boxed{2}"])
    eps, _ = play(cfg, [7], answer=lambda o, j: next(answers))
    game = eps[0].turns[-1].info["game"]
    assert [c["reason"] for c in game["clues"]] == [None, "no_box", "repeat", "multiple_boxes", "not_one_sentence", "empty"]
    rewards = [t.rewards["clue"] for t in eps[0].turns[:6]]
    base = [game["player_rewards"][c["player"]] for c in game["clues"]]
    assert rewards == pytest.approx([base[0]] + [b - 0.3 for b in base[1:]])
    stats = report(eps, cfg)["breakdown"]
    assert stats["clue_format_rate"] == pytest.approx(1 / 6) and stats["clue_fail/repeat"] == pytest.approx(1 / 6)


def test_unfinished_game_gets_unscored_clues_and_is_reported():
    cfg = Config(players=3, rounds=1)
    engine = ScriptEngine(truthful)
    eps = run_episodes(engine, lambda: make_env(cfg, "eval"), [1], 1, max_turns=2)
    score_episodes(eps, cfg)
    assert all(t.rewards["clue"] is None for t in eps[0].turns) and math.isnan(eps[0].total_reward())
    assert report(eps, cfg)["skipped"]["count"] == 1


def test_language_is_true_of_its_image_and_reference_decision():
    pair = grid_pair(3, k=1)
    rec = pair.record
    only_spy = [p for p in phrases(rec, True) if not is_true(p, rec, False)]
    assert only_spy and all(is_true(p, rec, True) for p in only_spy)
    shared = [p for p in phrases(rec, True) if is_true(p, rec, False)]
    assert false_clues([shared[0], None, only_spy[0]], rec) == 1
    assert reference_decision([[shared[0]], [only_spy[0]], [shared[1]]], rec) == 1
    assert reference_decision([[shared[0]], [shared[1]], [shared[2]]], rec) == NA
    assert reference_decision([[only_spy[0]], [only_spy[0]], []], rec) == NA  # a tie


def test_scripted_prompts_carry_reference_answers_and_rl_refuses_them():
    cfg = Config(scripted="decision")
    obs = make_env(cfg, "train").reset(4)
    assert obs.role == "observer" and obs.info["reference"].startswith("\\boxed{")
    obs = make_env(Config(scripted="clue"), "train").reset(4)
    clue = obs.info["reference"][len("\\boxed{"):-1]
    assert is_true(clue, obs.info["record"], obs.info["player"] == obs.info["spy"])
    with pytest.raises(ValueError, match="task.scripted"):
        role_schedule(cfg)


def test_fixed_and_adaptive_schedules_pick_the_trained_roles():
    fixed = role_schedule(Config(cycle=2))
    assert [fixed.trained_roles(s) for s in range(4)] == [["observer"]] * 2 + [["spy", "civilian"]] * 2
    cfg = Config(schedule="adaptive", switch_window=1, players=3, rounds=1, observer_samples=2, alarm_window=2)
    sched = role_schedule(cfg)
    eps, _ = play(cfg, [1, 2])
    m = sched.observe(0, eps, None)  # all decisions right, no N/A: switch to clue training
    assert m["game/decision_accuracy"] == 1.0 and m["game/phase_clue"] == 0.0
    assert sched.trained_roles(1) == ["spy", "civilian"]
    assert m["game/collapse_alarm"] == 1.0 and m["role/civilian/win_rate"] == 1.0  # 2 of 2 games to civilians
    wrong, _ = play(cfg, [3], answer=lambda o, j: "\\boxed{N/A}" if o.info["stage"] == "decision" else truthful(o, j))
    sched.observe(1, wrong, None)
    assert sched.trained_roles(2) == ["observer"]
    state = sched.state_dict()
    again = role_schedule(cfg)
    again.load_state_dict(state)
    assert again.state_dict() == state
    assert roles(Config(decision="vote")) == ["spy", "civilian", "voter"]


def test_alarm_needs_a_full_window():
    assert alarm(["spy"] * 9 + ["civilian"], 10, 0.85) == (1.0, 0.9)
    assert alarm(["spy"] * 9, 10, 0.85)[0] == 0.0
    assert alarm(["spy"] * 5 + ["civilian"] * 5, 10, 0.85)[0] == 0.0


def test_viewer_page_shows_the_game(tmp_path):
    from tasks.vision_zero.report import write_viewer

    eps, _ = play(Config(players=3, rounds=1, observer_samples=2), [0])
    page = write_viewer(eps, tmp_path / "g.html", "t").read_text()
    assert page.count("<img") == 2 and "spy is Player" in page and "votes received" in page


def test_bad_config_names_the_field():
    for kw, field in [({"players": 2}, "task.players"), ({"decision": "poll"}, "task.decision"),
                      ({"back_accuracy": 0.95}, "task.back_accuracy"), ({"pairs": "x"}, "task.pairs")]:
        with pytest.raises(ValueError, match=field):
            Config(**kw)


@pytest.mark.slow
def test_train_cli_one_step_writes_metrics(tmp_path):
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "vlrl/train.py", "task=vision_zero", "trainer.steps=1", f"trainer.output_dir={out}",
                    "trainer.progress=false", "trainer.prompts_per_step=2", "task.viewer_every=1"],
                   cwd=root, env=env, check=True, capture_output=True)
    rec = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert rec["game/games"] == 2.0 and "role/spy/baseline" in rec and "game/collapse_alarm" in rec
    assert (out / "games" / "step_0000001.html").exists()


def test_clue_true_rate_counts_clues_true_of_the_speakers_own_image():
    cfg = Config(players=3, rounds=1, observer_samples=1)
    eps, _ = play(cfg, [0, 1])
    assert report(eps, cfg)["breakdown"]["clue_true_rate"] == 1.0
    wrong, _ = play(cfg, [0, 1], answer=lambda o, j: truthful(o, j) if o.info["stage"] == "decision"
                    else "\\boxed{there is a purple hexagon}")
    assert report(wrong, cfg)["breakdown"]["clue_true_rate"] == 0.0


def test_verify_prompts_are_balanced_and_scored_against_the_shown_image():
    cfg = Config(scripted="verify")
    truths = []
    for seed in range(60):
        env = make_env(cfg, "train")
        obs = env.reset(seed)
        info = obs.info
        shown_modified = obs.images[0].tobytes() != env.pair.original.tobytes()
        assert obs.role == "verifier" and is_true(info["clue"], info["record"], shown_modified) == info["truth"]
        assert info["reference"] == ("\\boxed{yes}" if info["truth"] else "\\boxed{no}")
        if info["kind"] == "pair":  # a false phrase the pair's other image makes true: what exposes a spy
            assert is_true(info["clue"], info["record"], not shown_modified)
        assert info["kind"] in (("true",) if info["truth"] else ("pair", "other"))
        truths.append(info["truth"])
        result = env.step(info["reference"])
        assert result.done and result.rewards["verify"] == 1.0
    assert 20 < sum(truths) < 40  # even odds, not all one answer

    def answer(o, j):
        return "\\boxed{yes}" if o.info["seed"] % 2 else "\\boxed{maybe}"

    eps = run_episodes(ScriptEngine(answer), lambda: make_env(cfg, "eval"), list(range(8)), 1, 1)
    rep = report(eps, cfg)
    expected = sum(e.turns[-1].info["verify"]["truth"] for e in eps if e.turns[0].observation.info["seed"] % 2) / 8
    assert rep["count"] == 8 and rep["overall"] == pytest.approx(expected)
    assert rep["breakdown"]["invalid_rate"] == 0.5 and rep["breakdown"]["yes_rate"] == 0.5


def test_describe_prompts_have_one_right_answer_and_partial_credit():


    cfg = Config(scripted="describe")
    env = make_env(cfg, "eval")
    obs = env.reset(5)
    target = obs.info["target"]
    shown_modified = obs.images[0].tobytes() != env.pair.original.tobytes()
    assert target == description(obs.info["record"], shown_modified) and len(target) >= 2
    assert all(is_true(p, obs.info["record"], shown_modified) for p in target)
    assert env.step(obs.info["reference"]).info["describe"] == {"correct": 1.0, "exact": 1.0, "extra": 0}
    env.reset(5)
    half = env.step("\\boxed{" + target[0] + "; there is a purple hexagon}").info["describe"]
    assert half == {"correct": pytest.approx(1 / len(target)), "exact": 0.0, "extra": 1}
    assert env.reset(5) and env.step("no box").info["describe"]["correct"] == 0.0
    eps = run_episodes(ScriptEngine(lambda o, j: o.info["reference"]), lambda: make_env(cfg, "eval"), [0, 1, 2], 1, 1)
    assert report(eps, cfg)["overall"] == 1.0 and report(eps, cfg)["breakdown"]["exact_rate"] == 1.0


def test_check_clues_targets_check_every_clue_before_the_one_box():
    cfg = Config(scripted="decision", observer_checks="clues", grid=2, players=3, rounds=2)
    for seed in range(12):
        env = make_env(cfg, "train")
        obs = env.reset(seed)
        assert "Check each clue" in obs.messages[0]["content"][1]["text"]
        checks, answer = obs.info["reference"].rsplit(". ", 1)
        parts = checks.split("; ")
        assert len(parts) == 6
        for part, clue in zip(parts, env.clues):
            assert part == f"{clue['player'] + 1}: {clue['clue']} {'yes' if is_true(clue['clue'], env.pair.record, False) else 'no'}"
        by_player = [[c["clue"] for c in env.clues if c["player"] == j] for j in range(3)]
        ref = reference_decision(by_player, env.pair.record)
        assert answer == f"\\boxed{{{ref if ref == NA else ref + 1}}}"
        assert env.step(obs.info["reference"]).info["choice"] == ref  # the checks do not break the one-box parse
    assert "Check each clue" not in make_env(Config(scripted="decision"), "train").reset(0).messages[0]["content"][1]["text"]
    scene = make_env(Config(scripted="decision", observer_checks="scene_clues", grid=2, players=3), "train")
    obs = scene.reset(1)
    described, checks, _ = obs.info["reference"].split(". ")
    assert described == "; ".join(description(scene.pair.record, False)) and checks.count("; ") == 5
    with pytest.raises(ValueError, match="task.observer_checks"):
        Config(observer_checks="yes")


def test_check_accuracy_per_kind_of_clue():
    from tasks.vision_zero.report import check_results

    cfg = Config(scripted="decision", observer_checks="clues", grid=2, players=3, rounds=2, observer_samples=1)
    eps = run_episodes(ScriptEngine(lambda o, j: o.info["reference"]), lambda: make_env(cfg, "eval"), list(range(20)), 1, 1)
    games = [e.turns[-1].info["game"] for e in eps]
    assert all(len(check_results(g)) == 6 for g in games)
    br = report(eps, cfg)["breakdown"]
    assert br["check_accuracy/true_clues"] == 1.0 and br["check_accuracy/false_clues"] == 1.0
    flipped = run_episodes(ScriptEngine(lambda o, j: o.info["reference"].replace(" yes;", " no;")),
                           lambda: make_env(cfg, "eval"), list(range(20)), 1, 1)
    br = report(flipped, cfg)["breakdown"]
    assert br["check_accuracy/true_clues"] < 0.5 and br["check_accuracy/false_clues"] == 1.0
    bare = run_episodes(ScriptEngine(lambda o, j: "\\boxed{1}"), lambda: make_env(cfg, "eval"), [0, 1], 1, 1)
    assert report(bare, cfg)["breakdown"]["check_accuracy/true_clues"] == 0.0  # no checks written: all wrong
    plain = Config(scripted="decision", grid=2, players=3, observer_samples=1)
    eps = run_episodes(ScriptEngine(lambda o, j: o.info["reference"]), lambda: make_env(plain, "eval"), [0, 1], 1, 1)
    assert math.isnan(report(eps, plain)["breakdown"]["check_accuracy/false_clues"])


def test_check_reward_adds_the_share_of_right_checks_to_the_observers_reward():
    def rewards(check_reward, answer):
        cfg = Config(scripted="decision", observer_checks="look", grid=2, players=3, rounds=1, observer_samples=1,
                     check_reward=check_reward)
        env = make_env(cfg, "eval")
        obs = env.reset(3)
        res = env.step(answer(obs.info["reference"]))
        decision = res.info["game"]["decisions"][0]  # what the viewer shows: the total, with the share beside it
        assert decision["reward"] == res.rewards["decision"]
        assert decision.get("checks_right") == res.info.get("checks_right")
        return res.rewards["decision"], res.info

    reference = lambda ref: ref  # noqa: E731  (every check right)
    one_wrong = lambda ref: ref.replace(" yes;", " no;", 1) if " yes;" in ref else ref.replace(" no;", " yes;", 1)  # noqa: E731
    bare = lambda ref: "\\boxed{N/A}"  # noqa: E731  (no checks written: all wrong)
    base, info = rewards(0.0, reference)
    assert "checks_right" not in info  # the released reward: nothing graded
    for answer, share in ((reference, 1.0), (one_wrong, 2 / 3), (bare, 0.0)):
        plain, _ = rewards(0.0, answer)
        graded, info = rewards(0.5, answer)
        assert info["checks_right"] == pytest.approx(share) and graded == pytest.approx(plain + 0.5 * share)
    for bad in (dict(check_reward=-1.0), dict(check_reward=1.0), dict(check_reward=1.0, observer_checks="look", grid=2,
                                                                      decision="vote")):
        with pytest.raises(ValueError, match="check_reward"):
            Config(**bad)


def test_verify_look_says_what_is_at_the_place_before_the_box():
    cfg = Config(scripted="verify", grid=2, verify_look=True)
    kinds = set()
    for seed in range(40):
        env = make_env(cfg, "eval")
        obs = env.reset(seed)
        info = obs.info
        shown_modified = obs.images[0].tobytes() != env.pair.original.tobytes()
        look, box = info["reference"].split(". ")
        place = info["clue"].split(" is a ")[0]
        assert info["clue"].startswith(place + " is a ") and look.startswith(place + " is ")
        assert look in description(info["record"], shown_modified) or look == f"{place} is empty"
        assert (look == info["clue"]) == info["truth"] and box == ("\\boxed{yes}" if info["truth"] else "\\boxed{no}")
        kinds.add(info["kind"])
        assert env.step(info["reference"]).rewards["verify"] == 1.0
    assert kinds == {"true", "pair", "other"}
    with pytest.raises(ValueError, match="task.verify_look"):
        Config(verify_look=True, pairs="chart")


def test_look_checks_say_what_is_at_each_clues_place():
    from tasks.vision_zero.language import look

    cfg = Config(scripted="decision", observer_checks="look", grid=2, players=3, rounds=1, observer_samples=1)
    for seed in range(10):
        env = make_env(cfg, "train")
        obs = env.reset(seed)
        checks = obs.info["reference"].rsplit(". ", 1)[0].split("; ")
        for part, c in zip(checks, env.clues):
            assert c["clue"] in description(env.pair.record, c["player"] == env.spy)  # position phrases only
            seen = look(c["clue"], env.pair.record)
            assert seen in description(env.pair.record, False) or seen.endswith(" is empty")
            assert part == f"{c['player'] + 1}: {seen} {'yes' if seen == c['clue'] else 'no'}"
    eps = run_episodes(ScriptEngine(lambda o, j: o.info["reference"]), lambda: make_env(cfg, "eval"), list(range(12)), 1, 1)
    br = report(eps, cfg)["breakdown"]
    assert br["check_accuracy/true_clues"] == 1.0 and br["check_accuracy/false_clues"] == 1.0
    assert look("there is a red circle", env.pair.record) == "there is a red circle"  # names no place


def test_lie_rate_makes_false_clues_common_and_their_checks_say_no():
    from tasks.vision_zero.language import is_true, reference_decision

    base = Config(scripted="decision", observer_checks="look", grid=2, players=3, rounds=1, observer_samples=1)
    lying = Config(scripted="decision", observer_checks="look", grid=2, players=3, rounds=1, observer_samples=1,
                   lie_rate=0.5)
    false = {0: 0, 1: 0}
    for seed in range(60):
        for key, cfg in ((0, base), (1, lying)):
            env = make_env(cfg, "train")
            obs = env.reset(seed)
            record = env.pair.record
            wrong = [not is_true(c["clue"], record, False) for c in env.clues]
            false[key] += sum(wrong)
            assert all(c["clue"] in description(record, True) + description(record, False) or w
                       for c, w in zip(env.clues, wrong))
            checks = obs.info["reference"].rsplit(". ", 1)[0].split("; ")
            assert [p.endswith(" no") for p in checks] == wrong  # every false clue's check says no
            by_player = [[c["clue"] for c in env.clues if c["player"] == j] for j in range(3)]
            ref = reference_decision(by_player, record)
            assert obs.info["reference"].endswith(f"\\boxed{{{ref if ref == 'N/A' else ref + 1}}}")
    assert false[0] < 0.25 * 180 and false[1] > 0.45 * 180  # only exposing spy clues vs about half of all clues
    with pytest.raises(ValueError, match="task.lie_rate"):
        Config(lie_rate=0.5)  # real games: nothing to lie about, refused rather than ignored
    with pytest.raises(ValueError, match="task.lie_rate"):
        Config(scripted="decision", lie_rate=1.5)


def test_decision_accuracy_is_split_by_whether_the_clues_expose_the_spy():
    cfg = Config(scripted="decision", observer_checks="look", grid=2, players=3, rounds=1, observer_samples=1)
    seeds = list(range(40))
    checker = report(run_episodes(ScriptEngine(lambda o, j: o.info["reference"]), lambda: make_env(cfg, "eval"),
                                  seeds, 1, 1), cfg)["breakdown"]
    assert 0.3 < checker["exposed_rate"] < 0.7  # the scripted spy exposes its difference in about half the games
    assert checker["decision_accuracy/spy_exposed"] == 1.0 and checker["decision_accuracy/spy_not_exposed"] == 0.0
    always_1 = report(run_episodes(ScriptEngine(lambda o, j: "\\boxed{1}"), lambda: make_env(cfg, "eval"), seeds, 1, 1),
                      cfg)["breakdown"]
    assert always_1["exposed_rate"] == checker["exposed_rate"]
    spies = [make_env(cfg, "eval") for _ in seeds]
    first_is_spy = sum(env.reset(s) is not None and env.spy == 0 for env, s in zip(spies, seeds)) / len(seeds)
    assert math.isclose(always_1["decision_accuracy"], first_is_spy)
