"""Schedule timing: slots across DST changes, anchoring, bounds, jitter, previews and refusals listing every problem."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ice_mcp.errors import IceError
from ice_mcp.schedules.timing import (
    COUNT_CAP,
    CatchUp,
    ScheduleInvalid,
    SchedulePolicy,
    ScheduleSpec,
    count_between,
    describe_slot,
    jitter,
    next_slot,
    parse_instant,
    parse_policy,
    parse_spec,
    preview,
    slots_after,
    slots_between,
)

NY = ZoneInfo("America/New_York")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def spec(**data: object) -> ScheduleSpec:
    return parse_spec(data)


def iso(slots: list[datetime]) -> list[str]:
    return [describe_slot(s) for s in slots]


def local_day(day: str, zone: ZoneInfo = NY) -> tuple[datetime, datetime]:
    """(just before, end) of a local calendar day, in UTC: slots_between's (after, until]."""
    start = datetime.fromisoformat(day).replace(tzinfo=zone).astimezone(UTC)
    end = (datetime.fromisoformat(day) + timedelta(days=1)).replace(tzinfo=zone).astimezone(UTC)
    return start - timedelta(microseconds=1), end - timedelta(microseconds=1)


# -- cron across DST (cronsim 2.8 follows Debian cron) ---------------------------------------------------


def test_a_specific_time_in_the_repeated_hour_fires_once() -> None:
    daily = spec(cron="30 1 * * *", timezone="America/New_York")
    after, until = local_day("2026-11-01")
    assert iso(slots_between(daily, after, until, 10)) == ["2026-11-01T05:30:00Z"]  # 01:30 EDT, the first copy
    assert count_between(daily, after, until) == 1
    shown = preview(daily, 3, start=utc("2026-10-31T12:00:00"))
    assert shown["fires"][0] == {"at": "2026-11-01T05:30:00Z", "local": "2026-11-01T01:30:00-04:00"}
    assert shown["fires"][1] == {"at": "2026-11-02T06:30:00Z", "local": "2026-11-02T01:30:00-05:00"}
    assert [f["at"] for f in shown["fires"]] == iso(slots_after(daily, utc("2026-10-31T12:00:00"), 3))
    assert ("2026-11-01: 01:30 happens twice in America/New_York (clocks go back); it fires once, at 01:30 EDT"
            in shown["warnings"])


def test_a_specific_time_in_the_skipped_hour_fires_at_the_end_of_the_gap() -> None:
    daily = spec(cron="30 2 * * *", timezone="America/New_York")
    after, until = local_day("2026-03-08")
    assert iso(slots_between(daily, after, until, 10)) == ["2026-03-08T07:00:00Z"]  # 03:00 EDT
    shown = preview(daily, 3, start=utc("2026-03-07T12:00:00"))
    assert shown["fires"][0] == {"at": "2026-03-08T07:00:00Z", "local": "2026-03-08T03:00:00-04:00"}
    assert shown["fires"][1]["local"] == "2026-03-09T02:30:00-04:00"
    assert shown["warnings"] == [
        "2026-03-08: 02:30 does not exist in America/New_York (clocks go forward); it fires at 03:00 EDT"]


def test_preview_of_specific_hours_warns_of_dst_changes_a_year_ahead() -> None:
    daily = spec(cron="30 2 * * *", timezone="America/New_York")
    shown = preview(daily, 2, start=utc("2026-01-01T00:00:00"))
    assert shown["fires"][-1]["at"] == "2026-01-02T07:30:00Z"  # the gap is months past the last fire shown
    assert any(w.startswith("2026-03-08: 02:30 does not exist") for w in shown["warnings"])
    assert not any("2026-11-01" in w for w in shown["warnings"])  # 02:30 is not in the repeated hour


def test_star_and_step_hours_fire_in_both_copies_and_skip_the_gap() -> None:
    hourly = spec(cron="0 * * * *", timezone="America/New_York")
    after, until = local_day("2026-11-01")
    fall = slots_between(hourly, after, until, 100)
    assert len(fall) == 25
    assert {"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z"} <= set(iso(fall))  # 01:00 EDT and 01:00 EST
    after, until = local_day("2026-03-08")
    spring = slots_between(hourly, after, until, 100)
    assert len(spring) == 23
    assert "02:00" not in {s.astimezone(NY).strftime("%H:%M") for s in spring}

    half_hours = spec(cron="*/30 1 * * *", timezone="America/New_York")
    after, until = local_day("2026-11-01")
    assert iso(slots_between(half_hours, after, until, 10)) == [
        "2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:30:00Z"]
    shown = preview(half_hours, 2, start=utc("2026-10-31T12:00:00"))
    assert any("they fire both times (EDT and EST)" in w for w in shown["warnings"])

    step = spec(cron="*/30 2 * * *", timezone="America/New_York")
    after, until = local_day("2026-03-08")
    assert slots_between(step, after, until, 10) == []  # cronsim skips the hour that does not exist
    shown = preview(step, 2, start=utc("2026-03-07T12:00:00"))
    assert any(w.startswith("2026-03-08: 02:00 and 02:30 do not exist") and w.endswith("they are skipped")
               for w in shown["warnings"])


def test_started_in_the_second_copy_of_a_repeated_hour_gives_no_earlier_slot() -> None:
    daily = spec(cron="45 1 * * *", timezone="America/New_York")
    second_copy = utc("2026-11-01T06:10:00")  # 01:10 EST: 01:45 EDT (05:45Z) has passed
    assert iso(slots_after(daily, second_copy, 2)) == ["2026-11-02T06:45:00Z", "2026-11-03T06:45:00Z"]


# -- rrule normalised like cron ---------------------------------------------------------------------------


def test_rrule_moves_a_skipped_time_to_the_end_of_the_gap() -> None:
    rule = spec(rrule="RRULE:FREQ=DAILY;BYHOUR=2;BYMINUTE=30", timezone="America/New_York")
    start = utc("2026-03-06T12:00:17")  # the seconds of "now" do not leak into the slots
    assert iso(slots_after(rule, start, 3)) == [
        "2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]  # 02:30 EST, 03:00 EDT, 02:30 EDT
    shown = preview(rule, 3, start=start)
    assert [f["at"] for f in shown["fires"]] == iso(slots_after(rule, start, 3))
    assert shown["description"] == "RRULE: daily at 02:30 (America/New_York)"
    assert shown["warnings"] == [
        "2026-03-08: 02:30 does not exist in America/New_York (clocks go forward); it fires at 03:00 EDT"]


def test_rrule_fires_once_in_a_repeated_hour() -> None:
    rule = spec(rrule="RRULE:FREQ=DAILY;BYHOUR=1;BYMINUTE=30", timezone="America/New_York",
                start_at="2026-10-01T00:00:00")
    after, until = local_day("2026-11-01")
    assert iso(slots_between(rule, after, until, 10)) == ["2026-11-01T05:30:00Z"]
    hourly = spec(rrule="RRULE:FREQ=HOURLY", timezone="America/New_York", start_at="2026-10-01T00:00:00")
    assert len(slots_between(hourly, after, until, 100)) == 24  # 01:00 once (wall clock), unlike `0 * * * *`


def test_rrule_with_a_start_long_ago_is_fast_and_keeps_its_phase() -> None:
    rule = spec(rrule="RRULE:FREQ=MINUTELY;INTERVAL=7", start_at="2000-01-01T00:00:00Z")
    slots = slots_after(rule, utc("2026-05-01T00:00:00"), 3)
    assert all(int((s - utc("2000-01-01T00:00:00")).total_seconds()) % 420 == 0 for s in slots)
    assert [b - a for a, b in pairwise(slots)] == [timedelta(minutes=7)] * 2


def test_rrule_description_is_read_from_its_parts() -> None:
    weekly = spec(rrule="RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0", timezone="Europe/Paris")
    shown = preview(weekly, 2, start=utc("2026-11-25T00:00:00"))
    assert shown["description"] == "RRULE: weekly on MO at 09:00 (Europe/Paris)"
    assert shown["fires"][0] == {"at": "2026-11-30T08:00:00Z", "local": "2026-11-30T09:00:00+01:00"}


# -- intervals: absolute durations ------------------------------------------------------------------------


def test_intervals_are_anchored_at_the_epoch_or_at_start_at() -> None:
    hourly = spec(every_seconds=3600, timezone="America/New_York")
    assert iso(slots_after(hourly, utc("2026-03-08T06:30:00"), 2)) == ["2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"]
    seven = spec(every_seconds=7)
    for slot in slots_after(seven, utc("2026-05-01T12:34:56.789"), 5):
        assert int(slot.timestamp()) % 7 == 0 and slot.microsecond == 0
    anchored = spec(every_seconds=60, start_at="2026-01-01T00:00:10Z")
    assert iso(slots_after(anchored, utc("2025-12-31T00:00:00"), 2)) == ["2026-01-01T00:00:10Z", "2026-01-01T00:01:10Z"]
    assert iso(slots_after(anchored, utc("2026-01-01T00:00:10"), 1)) == ["2026-01-01T00:01:10Z"]  # after is exclusive
    fractional = spec(every_seconds=1.5, start_at="2026-01-01T00:00:00Z")
    assert iso(slots_after(fractional, utc("2026-01-01T00:00:00"), 2)) == ["2026-01-01T00:00:01.500000Z",
                                                                          "2026-01-01T00:00:03Z"]


def test_count_between_is_arithmetic_for_intervals() -> None:
    second = spec(every_seconds=1)
    assert count_between(second, utc("2026-01-01T00:00:00"), utc("2026-01-02T00:00:00")) == 86400
    # a century of seconds could not be counted one by one
    assert count_between(second, utc("2000-01-01T00:00:00"), utc("2100-01-01T00:00:00")) == 3_155_760_000
    bounded = spec(every_seconds=1, start_at="2026-01-01T00:00:00Z", end_at="2026-01-01T00:01:00Z")
    assert count_between(bounded, utc("2025-01-01T00:00:00"), utc("2027-01-01T00:00:00")) == 61  # both ends in
    assert count_between(second, utc("2026-01-02T00:00:00"), utc("2026-01-01T00:00:00")) == 0


def test_count_between_caps_cron_and_rrule_counting() -> None:
    minutely = spec(cron="* * * * *")
    assert count_between(minutely, utc("2026-01-01T00:00:00"), utc("2026-01-01T01:00:00")) == 60
    assert count_between(minutely, utc("2026-01-01T00:00:00"), utc("2027-01-01T00:00:00"), cap=1000) == 1000
    assert COUNT_CAP == 100_000


# -- bounds -----------------------------------------------------------------------------------------------


def test_start_and_end_bound_the_slots_inclusively() -> None:
    hourly = spec(cron="0 * * * *", start_at="2026-05-01T10:00:00Z", end_at="2026-05-01T12:00:00Z")
    slots = slots_between(hourly, utc("2026-05-01T00:00:00"), utc("2026-05-02T00:00:00"), 100)
    assert iso(slots) == ["2026-05-01T10:00:00Z", "2026-05-01T11:00:00Z", "2026-05-01T12:00:00Z"]
    assert count_between(hourly, utc("2026-05-01T00:00:00"), utc("2026-05-02T00:00:00")) == 3
    assert slots_after(hourly, utc("2026-05-01T12:00:00"), 5) == []
    assert next_slot(hourly, utc("2026-05-01T12:00:00")) is None
    shown = preview(hourly, 5, start=utc("2026-05-02T00:00:00"))
    assert shown["fires"] == [] and shown["warnings"] == [
        "no fires after 2026-05-02T00:00:00Z: the schedule ended at 2026-05-01T12:00:00Z"]


def test_naive_bounds_are_read_in_the_schedule_zone() -> None:
    paris = spec(cron="0 9 * * *", timezone="Europe/Paris", start_at="2026-07-01T09:00:00")
    assert paris.start_at == utc("2026-07-01T07:00:00")
    assert iso(slots_after(paris, utc("2026-01-01T00:00:00"), 1)) == ["2026-07-01T07:00:00Z"]
    gap = spec(cron="0 9 * * *", timezone="America/New_York", start_at="2026-03-08T02:30:00")
    assert gap.start_at == utc("2026-03-08T07:00:00")  # a start in the gap: the end of the gap


def test_a_checked_spec_round_trips_through_its_json() -> None:
    original = spec(cron="0 9 * * MON", timezone="Europe/Paris", start_at="2026-07-01T09:00:00", jitter_seconds=30)
    dumped = original.model_dump(mode="json", exclude_none=True)
    assert dumped["start_at"] == "2026-07-01T07:00:00Z"
    assert parse_spec(dumped) == original


# -- jitter -----------------------------------------------------------------------------------------------


def test_jitter_is_deterministic_and_never_reaches_the_next_slot() -> None:
    jittered = spec(every_seconds=60, jitter_seconds=600)
    slot = utc("2026-05-01T10:00:00")
    first = jitter(jittered, "nightly", slot, None)
    assert first == jitter(jittered, "nightly", slot, None)
    assert 0 <= first <= 600
    assert jitter(jittered, "nightly", slot, None) != jitter(jittered, "hourly", slot, None)
    for slot in slots_after(jittered, utc("2026-05-01T00:00:00"), 200):
        following = slot + timedelta(seconds=60)
        delay = jitter(jittered, "nightly", slot, following)
        assert 0 <= delay <= 0.9 * 60 and slot + timedelta(seconds=delay) < following
    assert jitter(spec(every_seconds=60), "nightly", slot, None) == 0.0
    wide = spec(cron="0 * * * *", jitter_seconds=5)
    delays = [jitter(wide, "s", s, None) for s in slots_after(wide, utc("2026-05-01T00:00:00"), 100)]
    assert all(0 <= d <= 5 for d in delays) and len(set(delays)) > 90


# -- refusals ---------------------------------------------------------------------------------------------


def test_every_problem_is_listed_at_once_with_the_nearest_zones() -> None:
    with pytest.raises(ScheduleInvalid) as caught:
        parse_spec({"cron": "61 * * * *", "every_seconds": 0.5, "timezone": "Europe/Pari", "jitter_seconds": -1,
                    "start_at": "2026-01-02T00:00:00Z", "end_at": "2026-01-01T00:00:00Z", "colour": "blue"})
    error = caught.value
    assert isinstance(error, IceError) and error.code == "invalid_schedule"
    by_path = {e["path"]: e["message"] for e in error.details["errors"]}
    assert set(by_path) == {"cron", "every_seconds", "timezone", "jitter_seconds", "end_at", "colour", ""}
    assert by_path["cron"] == "invalid cron '61 * * * *': Bad minute"
    assert by_path["timezone"].startswith("unknown time zone 'Europe/Pari'; did you mean Europe/Paris, ")
    assert by_path["timezone"].count(",") == 2  # three suggestions
    assert "at least 1 second" in by_path["every_seconds"]
    assert "only one of cron, every_seconds or rrule" in by_path[""]
    assert "must come after start_at" in by_path["end_at"]
    assert by_path["colour"].startswith("unknown key 'colour'")
    assert error.message.startswith("invalid schedule (7 problems): ")
    assert error.as_dict()["code"] == "invalid_schedule"


@pytest.mark.parametrize(("data", "path", "fragment"), [
    ({"every_seconds": 0.5}, "every_seconds", "at least 1 second"),
    ({"every_second": 60}, "every_second", "did you mean 'every_seconds'?"),
    ({}, "", "give one of cron, every_seconds or rrule"),
    ({"cron": "0 9 * * MON", "rrule": "RRULE:FREQ=DAILY"}, "", "got cron and rrule"),
    ({"cron": "0 9 * *"}, "cron", "has 4 fields; give 5"),
    ({"cron": "0 0 9 * * MON"}, "cron", "a seconds field is not supported"),
    ({"cron": "@daily"}, "cron", "write '0 0 * * *' instead"),
    ({"cron": "0 0 30 2 *"}, "cron", "Bad day-of-month"),
    ({"cron": "0 9 * * *", "timezone": "paris"}, "timezone", "did you mean Europe/Paris"),
    ({"rrule": "RRULE:FREQ=DAILY;BYHOUR=25"}, "rrule", "invalid rrule"),
    ({"rrule": "RRULE:FREQ=SOMETIMES"}, "rrule", "rrule needs FREQ"),
    ({"rrule": "DTSTART:20260101T000000\nRRULE:FREQ=DAILY"}, "rrule", "give one RRULE line"),
    ({"rrule": "RRULE:FREQ=DAILY;UNTIL=20270101T000000Z"}, "rrule", "drop the 'Z'"),
    ({"rrule": "RRULE:FREQ=DAILY;COUNT=3"}, "rrule", "COUNT counts from `start_at`"),
    ({"rrule": "RRULE:FREQ=WEEKLY;INTERVAL=2"}, "rrule", "INTERVAL counts from `start_at`"),
    ({"rrule": "RRULE:FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=30"}, "rrule", "never fires"),
    ({"rrule": "RRULE:FREQ=HOURLY;BYSETPOS=2"}, "rrule", "BYSETPOS needs FREQ=DAILY"),
    ({"rrule": "RRULE:FREQ=DAILY;INTERVAL=7;BYDAY=TU", "start_at": "2026-03-02T09:00:00Z"}, "rrule", "never fires"),
    ({"every_seconds": 60, "jitter_seconds": -1}, "jitter_seconds", "0 or more"),
    ({"every_seconds": 60, "start_at": "tomorrow"}, "start_at", "datetime"),
])
def test_a_bad_spec_is_refused_with_its_path(data: dict[str, object], path: str, fragment: str) -> None:
    with pytest.raises(ScheduleInvalid) as caught:
        parse_spec(data)
    errors = caught.value.details["errors"]
    assert any(e["path"] == path and fragment in e["message"] for e in errors), errors


def test_a_spec_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ScheduleInvalid, match="is an object"):
        parse_spec("0 9 * * *")  # type: ignore[arg-type]


def test_policy_defaults_and_problems() -> None:
    assert parse_policy(None) == SchedulePolicy(overlap="skip", catchup=CatchUp(mode="latest"), pause_on_failure=False)
    assert parse_policy({"catchup": {"mode": "all", "max_runs": 3}}).catchup.max_runs == 3
    with pytest.raises(ScheduleInvalid) as caught:
        parse_policy({"overlap": "sometimes", "catchup": {"window_seconds": 0, "max_run": 3}})
    paths = {e["path"]: e["message"] for e in caught.value.details["errors"]}
    assert set(paths) == {"overlap", "catchup.window_seconds", "catchup.max_run"}
    assert paths["catchup.max_run"] == "unknown key 'max_run'; did you mean 'max_runs'?"


# -- words and instants ---------------------------------------------------------------------------------


def test_descriptions() -> None:
    start = utc("2026-11-25T00:00:00")
    assert (preview(spec(cron="0 9 * * MON", timezone="Europe/Paris"), 1, start=start)["description"]
            == "At 09:00 AM, only on Monday (Europe/Paris)")
    assert preview(spec(every_seconds=300), 1, start=start)["description"] == "every 5 minutes"
    assert preview(spec(every_seconds=3600), 1, start=start)["description"] == "every hour"
    assert preview(spec(every_seconds=90), 1, start=start)["description"] == "every 90 seconds"
    five = preview(spec(every_seconds=5), 1, start=start)
    assert five["description"] == "every 5 seconds"
    assert five["warnings"][0].startswith("fires every 5 seconds: 17,280 runs a day")
    assert five["timezone"] == "UTC" and five["fires"] == [{"at": "2026-11-25T00:00:05Z",
                                                             "local": "2026-11-25T00:00:05+00:00"}]


def test_describe_slot_and_parse_instant() -> None:
    assert describe_slot(utc("2026-11-30T08:00:00")) == "2026-11-30T08:00:00Z"
    assert describe_slot(datetime(2026, 11, 30, 9, tzinfo=ZoneInfo("Europe/Paris"))) == "2026-11-30T08:00:00Z"
    assert describe_slot(utc("2026-11-30T08:00:00.250")) == "2026-11-30T08:00:00.250000Z"
    with pytest.raises(ValueError, match="naive"):
        describe_slot(datetime(2026, 11, 30, 8))
    assert parse_instant("2026-11-30T08:00:00Z") == utc("2026-11-30T08:00:00")
    assert parse_instant("2026-11-30T09:00:00+01:00") == utc("2026-11-30T08:00:00")
    assert parse_instant("2026-11-30T08:00:00") == utc("2026-11-30T08:00:00")  # naive: UTC
    assert parse_instant(datetime(2026, 11, 30, 9, tzinfo=ZoneInfo("Europe/Paris"))).tzinfo is UTC
    with pytest.raises(ScheduleInvalid) as caught:
        parse_instant("next tuesday", path="end")
    assert caught.value.details["errors"][0]["path"] == "end"
    with pytest.raises(ValueError, match="aware"):
        slots_after(spec(every_seconds=60), datetime(2026, 1, 1), 1)


# -- properties -------------------------------------------------------------------------------------------

SPECS = [
    spec(cron="30 1 * * *", timezone="America/New_York"),
    spec(cron="*/20 1-3 * * *", timezone="America/New_York"),
    spec(cron="0 * * * *", timezone="Europe/Paris"),
    spec(cron="15 2 * * SUN", timezone="Europe/London", jitter_seconds=30),
    spec(every_seconds=3600 * 5 + 7),
    spec(every_seconds=1.5, start_at="2026-01-01T00:00:00Z"),
    spec(rrule="RRULE:FREQ=DAILY;BYHOUR=1,2;BYMINUTE=30", timezone="America/New_York"),
    spec(rrule="RRULE:FREQ=HOURLY;INTERVAL=3", timezone="Australia/Lord_Howe", start_at="2025-06-01T00:00:00"),
    spec(cron="0 */4 * * *", timezone="UTC", start_at="2026-03-01T00:00:00Z", end_at="2026-12-01T00:00:00Z"),
]
INSTANTS = st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2028, 1, 1)).map(
    lambda d: d.replace(tzinfo=UTC))


@given(st.sampled_from(SPECS), INSTANTS, st.integers(min_value=1, max_value=40))
def test_slots_increase_and_slots_between_is_a_prefix_of_slots_after(
        schedule: ScheduleSpec, after: datetime, count: int) -> None:
    slots = slots_after(schedule, after, count)
    assert all(s.tzinfo is UTC for s in slots)
    assert all(a < b for a, b in zip([after, *slots], slots, strict=False))
    if slots:
        until = slots[-1]
        assert slots_between(schedule, after, until, count + 10) == slots
        assert slots_between(schedule, after, until, 3) == slots[:3]
        assert count_between(schedule, after, until) == len(slots)
        assert slots_after(schedule, slots[0], count - 1) == slots[1:]


@given(st.sampled_from([s for s in SPECS if s.every_seconds is not None]), INSTANTS,
       st.integers(min_value=0, max_value=10**7))
def test_interval_counts_match_the_slots(schedule: ScheduleSpec, after: datetime, span: int) -> None:
    until = after + timedelta(seconds=span)
    slots = slots_between(schedule, after, until, 100_000)
    if len(slots) < 100_000:
        assert count_between(schedule, after, until) == len(slots)


def test_one_zone_is_checked_alone_as_the_listing_would() -> None:
    """`known_zone` loads one zone instead of listing them all (~6 ms at start-up), and agrees with the listing."""
    import os
    import zoneinfo

    from ice_mcp.schedules.spec import known_zone, zone_names

    names = zone_names()
    candidates = set(names) | {"utc", "Europe", "", "../etc/passwd", "/etc/passwd", "posix/Europe/Paris",
                               "right/UTC", "posixrules", "Europe/Nowhere", "Europe/Paris/"}
    for root in zoneinfo.TZPATH:  # every file of the zone folders: tables, leap seconds, posix/ and right/ copies
        for folder, _, files in os.walk(root):
            candidates.update(os.path.relpath(os.path.join(folder, f), root) for f in files)
    assert {name for name in candidates if known_zone(name)} == names
