"""What a cron is, apart from the server: schedules read in a time zone, the next run time,
``end_time``, and what claiming a due cron decides (one run for the times missed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graph_agent.serve.crons_schedule import (
    CronRecord,
    Due,
    due_run,
    end_time_of,
    next_run,
    schedule_problem,
    stamp,
)

NOON = datetime(2030, 3, 9, 12, 0, tzinfo=UTC)  # the day before New York's clocks go forward


def test_the_next_run_is_strictly_after_the_moment() -> None:
    assert next_run("* * * * *", None, NOON) == NOON + timedelta(minutes=1)
    assert next_run("0 12 * * *", None, NOON) == NOON + timedelta(days=1)


def test_a_schedule_is_read_in_its_time_zone_across_daylight_saving_time() -> None:
    # 09:00 in New York: 14:00 UTC on Saturday (EST), 13:00 UTC on Sunday (EDT)
    saturday = next_run("0 9 * * *", "America/New_York", NOON)
    assert saturday == datetime(2030, 3, 9, 14, 0, tzinfo=UTC)
    assert next_run("0 9 * * *", "America/New_York", saturday) == datetime(
        2030, 3, 10, 13, 0, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("schedule", "timezone", "detail"),
    [
        ("* * * *", None, "not a cron expression of 5 fields"),
        ("* * * * * *", None, "not a cron expression of 5 fields"),
        ("60 * * * *", None, "cannot be read"),
        ("* * 32 * *", None, "cannot be read"),
        ("* * * * *", "Not/AZone", "'Not/AZone' is no IANA time zone"),
        ("* * * * *", "../etc/passwd", "is no IANA time zone"),
    ],
)
def test_a_bad_schedule_or_time_zone_is_named(
    schedule: str, timezone: str | None, detail: str
) -> None:
    problem = schedule_problem(schedule, timezone)
    assert problem is not None and detail in problem


def test_good_schedules_have_no_problem() -> None:
    for schedule in ("*/5 * * * *", "0 9 * * 1-5", "30 2 1,15 * *", "0 0 * * SUN"):
        assert schedule_problem(schedule, "Europe/Paris") is None


def test_an_end_time_without_an_offset_is_utc_and_a_bad_one_is_named() -> None:
    assert end_time_of("2030-01-01T10:00:00") == datetime(2030, 1, 1, 10, tzinfo=UTC)
    assert end_time_of("2030-01-01T10:00:00+02:00") == datetime(2030, 1, 1, 8, tzinfo=UTC)
    with pytest.raises(ValueError, match="no ISO 8601"):
        end_time_of("soon")


def _cron(**fields: object) -> CronRecord:
    defaults: dict[str, object] = {
        "cron_id": "c1",
        "assistant_id": "chain",
        "thread_id": None,
        "schedule": "*/10 * * * *",
        "payload": {"assistant_id": "chain", "input": {"x": 1}},
        "metadata": {"owner": "k1"},
        "on_run_completed": "delete",
        "next_run_date": stamp(NOON),
    }
    return CronRecord(**{**defaults, **fields})  # type: ignore[arg-type]


def _due(cron: CronRecord, moment: datetime) -> Due:
    return due_run(cron, moment)


def test_times_missed_while_down_make_one_run_then_the_schedule_goes_on_from_now() -> None:
    due = _due(_cron(), NOON + timedelta(hours=3, minutes=4))
    assert due.run is not None and due.run.due_at == stamp(NOON)
    assert due.next_run_date == stamp(NOON + timedelta(hours=3, minutes=10))


def test_a_stateless_crons_run_gets_a_new_thread_owned_as_the_cron_is() -> None:
    run = _due(_cron(), NOON).run
    assert run is not None and run.thread_metadata == {"owner": "k1"} and run.delete_thread
    assert run.body["metadata"] == {"cron_id": "c1"} and run.body["input"] == {"x": 1}
    kept = _due(_cron(on_run_completed="keep"), NOON).run
    assert kept is not None and not kept.delete_thread
    on_thread = _due(_cron(thread_id="t1", on_run_completed=None), NOON).run
    assert on_thread is not None and on_thread.thread_id == "t1"
    assert on_thread.thread_metadata is None and not on_thread.delete_thread


def test_end_time_stops_the_schedule() -> None:
    due = _due(_cron(end_time=stamp(NOON + timedelta(minutes=5))), NOON)
    assert due.run is not None and due.next_run_date is None
    past = _due(_cron(end_time=stamp(NOON - timedelta(minutes=1))), NOON)
    assert past.run is None and past.next_run_date is None
