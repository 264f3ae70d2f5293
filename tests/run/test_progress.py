"""The progress model (run/progress.py): done per environment, running rates, errors,
kept records and the ETA, on a fake clock the test moves itself."""

from __future__ import annotations

import pytest

from pytest_agentgym.run.progress import Progress, duration_text, parse_duration, progress_line


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def play(progress: Progress, clock: Clock, env: str, duration: float, *, gap: float = 0.0,
         success: bool = True, reward: float | None = 1.0, error: bool = False) -> None:
    """One episode played after the previous one: ``gap`` of the run's own time, then the episode."""
    clock.now += gap + duration
    progress.finished(env, success=success, reward=reward, duration_s=duration, error=error)


def test_a_steady_model_gets_an_eta_within_20_percent_of_the_real_remaining_time_after_10_episodes():
    clock = Clock()
    progress = Progress({"Maze": 16}, concurrency=1, clock=clock)
    finish_times = []
    for _ in range(16):
        play(progress, clock, "Maze", 1.5, gap=0.1)  # 1.5 s episodes, 0.1 s of the run's own between them
        finish_times.append(clock.now)
        if len(finish_times) == 10:
            eta = progress.eta()
    real_remaining = finish_times[-1] - finish_times[9]
    assert eta is not None
    assert abs(eta - real_remaining) <= 0.2 * real_remaining, (eta, real_remaining)
    assert progress.eta() == 0.0


def test_the_eta_counts_the_episodes_side_by_side_up_to_the_concurrency():
    clock = Clock()
    progress = Progress({"BabyAI": 40}, concurrency=4, clock=clock)
    for _ in range(5):  # waves of 4 episodes of 2 s each, side by side
        clock.now += 2.0
        for _ in range(4):
            progress.finished("BabyAI", success=True, reward=1.0, duration_s=2.0)
    # 20 left at 4 at a time, 2 s each: 10 s
    assert progress.eta() == pytest.approx(10.0)


def test_the_parallelism_is_capped_by_the_concurrency():
    """Durations that overlap more than the concurrency allows (a clock that disagrees)
    do not make the run look faster than its concurrency."""
    clock = Clock()
    progress = Progress({"Maze": 10}, concurrency=2, clock=clock)
    clock.now += 1.0
    for _ in range(5):
        progress.finished("Maze", success=True, reward=1.0, duration_s=1.0)  # 5 s of episodes in 1 s
    assert progress.eta() == pytest.approx(5 * 1.0 / 2)


def test_the_eta_goes_down_while_an_episode_plays_but_not_below_the_episodes_not_begun():
    clock = Clock()
    progress = Progress({"Maze": 5}, concurrency=1, clock=clock)
    play(progress, clock, "Maze", 10.0)
    play(progress, clock, "Maze", 10.0)
    assert progress.eta() == pytest.approx(30.0)
    clock.now += 4.0
    assert progress.eta() == pytest.approx(26.0)
    clock.now += 100.0  # the third episode runs long: the two not begun still take 20 s
    assert progress.eta() == pytest.approx(20.0)


def test_no_eta_before_the_first_played_episode():
    clock = Clock()
    progress = Progress({"Maze": 3}, concurrency=1, clock=clock)
    assert progress.eta() is None
    clock.now += 50
    progress.finished("Maze", success=True, reward=1.0, duration_s=0.0, kept=True)
    assert progress.eta() is None
    assert "ETA ?" in progress_line(progress.snapshot())


def test_kept_records_count_as_done_and_in_the_rates_but_not_in_the_eta():
    clock = Clock()
    progress = Progress({"Maze": 10}, concurrency=1, clock=clock)
    for _ in range(6):  # kept from the earlier generation, each took 100 s back then
        progress.finished("Maze", success=False, reward=0.0, duration_s=100.0, kept=True)
    play(progress, clock, "Maze", 2.0)
    play(progress, clock, "Maze", 2.0)
    snap = progress.snapshot()
    assert (snap.done, snap.planned, snap.kept) == (8, 10, 6)
    assert snap.envs["Maze"].success_rate == pytest.approx(2 / 8)
    assert progress.eta() == pytest.approx(2 * 2.0)
    assert ", 6 kept," in progress_line(snap)


def test_errors_are_counted_and_left_out_of_the_rates():
    clock = Clock()
    progress = Progress({"BabyAI": 4, "Maze": 4}, concurrency=1, clock=clock)
    play(progress, clock, "BabyAI", 1.0, success=True, reward=0.8)
    play(progress, clock, "BabyAI", 1.0, success=False, reward=0.0)
    play(progress, clock, "BabyAI", 1.0, success=False, reward=None, error=True)
    play(progress, clock, "Maze", 1.0, success=False, reward=None, error=True)
    snap = progress.snapshot()
    babyai, maze = snap.envs["BabyAI"], snap.envs["Maze"]
    assert (babyai.done, babyai.errors, babyai.success_rate, babyai.mean_reward) == (3, 1, 0.5, pytest.approx(0.4))
    assert (maze.done, maze.errors, maze.success_rate, maze.mean_reward) == (1, 1, None, None)
    assert snap.errors == 2
    assert progress_line(snap) == ("agentgym: 4/8 done (BabyAI 3/4 50% r=0.40, Maze 1/4), 2 errors, "
                                   "elapsed 4.0s, ETA 4.0s")


def test_an_environment_not_planned_is_added_so_done_never_exceeds_planned():
    progress = Progress({"Maze": 1}, concurrency=1, clock=Clock())
    progress.finished("Maze", success=True, reward=1.0, duration_s=1.0)
    progress.finished("TextCraft", success=True, reward=1.0, duration_s=1.0)
    snap = progress.snapshot()
    assert (snap.done, snap.planned, snap.envs["TextCraft"].planned) == (2, 2, 1)


def test_a_concurrency_below_one_is_refused():
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        Progress({"Maze": 1}, concurrency=0)


@pytest.mark.parametrize("seconds, text", [(0.0, "0.0s"), (8.34, "8.3s"), (612.0, "10m12s"),
                                           (3599.6, "1h00m"), (7530.0, "2h05m")])
def test_durations_are_written_short_and_read_back(seconds, text):
    assert duration_text(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds, abs=30 if "h" in text else 0.5)


def test_a_line_that_is_no_duration_is_refused_with_the_forms_it_takes():
    with pytest.raises(ValueError, match="not a duration like 8.3s, 10m12s or 2h05m"):
        parse_duration("soon")


def test_time_before_the_first_episode_began_does_not_count_against_the_parallelism():
    """xdist's workers start a while after the controller's clock: the first episode that
    ends began `duration` before, and the run's idle start is left out of ``p``."""
    clock = Clock()
    progress = Progress({"Maze": 12}, concurrency=2, clock=clock)
    clock.now += 5.0  # workers starting
    for _ in range(2):  # then two at a time, 1 s each
        clock.now += 1.0
        progress.finished("Maze", success=True, reward=1.0, duration_s=1.0)
        progress.finished("Maze", success=True, reward=1.0, duration_s=1.0)
    assert progress.eta() == pytest.approx(8 * 1.0 / 2)
    assert progress.snapshot().elapsed_s == pytest.approx(7.0)


def test_an_environment_stopped_early_is_planned_no_more_than_it_has_done():
    clock = Clock()
    progress = Progress({"BabyAI": 40, "Maze": 4}, concurrency=1, clock=clock)
    for _ in range(10):
        play(progress, clock, "BabyAI", 1.0)
    progress.stopped("BabyAI")  # decided after 10 (--agentgym-stop-when-decided)
    assert progress.eta() == pytest.approx(4 * 1.0)
    play(progress, clock, "BabyAI", 1.0)  # one that was in flight still ends
    snap = progress.snapshot()
    assert (snap.done, snap.planned) == (11, 15)
    assert "BabyAI 11/11 100% r=1.00 stopped" in progress_line(snap)
