"""Schedule timing: the slots of a spec, their jitter, and a preview in words with DST warnings.

Pure: no I/O and no clock reads; every "now" is a parameter. A slot is a nominal instant, returned as an
aware datetime in UTC. Cron follows Debian cron through cronsim (a specific time inside a skipped hour
fires at the end of the gap, one inside a repeated hour fires once, `*` and step hours fire in both
copies); an rrule is normalised the same way; an interval is an absolute duration from `start_at`, or
from the Unix epoch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from itertools import islice, takewhile
from typing import Any

from cronsim import CronSim
from dateutil.rrule import rrule as RRule
from dateutil.rrule import rrulestr

from ice_mcp.schedules.spec import (
    RRULE_FREQS,
    CatchUp,
    ScheduleInvalid,
    SchedulePolicy,
    ScheduleSpec,
    describe_slot,
    instant,
    localise,
    parse_instant,
    parse_policy,
    parse_spec,
    rrule_body,
    rrule_parts,
    slot_text,
)
from ice_mcp.schedules.words import describe, every_words, sub_minute_warning

__all__ = [
    "COUNT_CAP", "CatchUp", "ScheduleInvalid", "SchedulePolicy", "ScheduleSpec", "count_between",
    "cron_is_specific", "describe_slot", "instant", "jitter", "next_slot", "parse_instant", "parse_policy",
    "parse_spec", "preview", "slot_text", "slots_after", "slots_between",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
COUNT_CAP = 100_000  # count_between stops counting cron and rrule slots here: the answer means "at least"
MAX_WARNINGS = 5
DST_SCAN_DAYS = 366  # how far a preview of a cron with specific hours looks for DST changes
RRULE_SLACK = timedelta(hours=3)  # more than any DST shift: where a wall-clock search may start early
_US = timedelta(microseconds=1)
_PERIODS = {"WEEKLY": timedelta(weeks=1), "DAILY": timedelta(days=1), "HOURLY": timedelta(hours=1),
            "MINUTELY": timedelta(minutes=1), "SECONDLY": timedelta(seconds=1)}


def _utc(dt: datetime, name: str) -> datetime:
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime, not naive {dt.isoformat()}")
    return dt.astimezone(UTC)


def _micros(dt: datetime) -> int:
    return (dt - EPOCH) // _US


# -- the three kinds of slot ---------------------------------------------------------------------------


def cron_is_specific(expr: str) -> bool:
    """Whether cronsim applies Debian cron's DST rules (moved from a gap, once in a repeat): neither the
    minute nor the hour field starts with `*`. Otherwise slots step through real time (both copies)."""
    minute, hour = expr.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


def _cron_slots(spec: ScheduleSpec, lower: datetime) -> Iterator[datetime]:
    assert spec.cron is not None
    # cronsim drops microseconds and starts one second on: whole-second slots after `lower`. Started in the
    # second copy of a repeated hour, it may first give a slot of the first copy: the filter drops it.
    last = lower
    for local in CronSim(spec.cron, lower.astimezone(spec.tz)):
        slot = local.astimezone(UTC)
        if slot > last:
            last = slot
            yield slot


def _interval_slots(spec: ScheduleSpec, lower: datetime) -> Iterator[datetime]:
    assert spec.every_seconds is not None
    step = round(spec.every_seconds * 1_000_000)
    anchor = _micros(spec.start_at) if spec.start_at is not None else 0
    k = (_micros(lower) - anchor) // step + 1
    while True:
        try:
            slot = EPOCH + timedelta(microseconds=anchor + k * step)
        except OverflowError:
            return
        yield slot
        k += 1


def rrule_start(spec: ScheduleSpec, after: datetime) -> datetime:
    """The naive wall-clock DTSTART of the spec's rule: `start_at`, else `after` floored to the second with
    the parts finer than FREQ that the rule leaves open set to zero (so FREQ=DAILY;BYHOUR=9 fires at 09:00:00,
    and FREQ=DAILY at midnight, whatever second it is asked at)."""
    assert spec.rrule is not None
    if spec.start_at is not None:
        return spec.start_at.astimezone(spec.tz).replace(tzinfo=None, microsecond=0)
    wall = _utc(after, "after").astimezone(spec.tz).replace(tzinfo=None, microsecond=0, fold=0)
    parts = rrule_parts(spec.rrule)
    level = RRULE_FREQS.index(parts["FREQ"].upper())  # 0 YEARLY ... 6 SECONDLY
    if level < 6 and "BYSECOND" not in parts:
        wall = wall.replace(second=0)
    if level < 5 and "BYMINUTE" not in parts:
        wall = wall.replace(minute=0)
    if level < 4 and "BYHOUR" not in parts:
        wall = wall.replace(hour=0)
    return wall


def rrule_rule(spec: ScheduleSpec, dtstart: datetime, near: datetime | None = None) -> RRule:
    """The spec's rule from `dtstart` (naive wall clock). With `near` (naive), DTSTART moves on by whole
    periods to just before it when that cannot change the occurrences (no COUNT; FREQ up to WEEKLY)."""
    assert spec.rrule is not None
    parts = rrule_parts(spec.rrule)
    period = _PERIODS.get(parts["FREQ"].upper())
    if near is not None and period is not None and "COUNT" not in parts:
        period *= int(parts.get("INTERVAL") or 1)
        if near - dtstart > 2 * period:
            dtstart += ((near - dtstart) // period - 1) * period
    rule = rrulestr(rrule_body(spec.rrule), dtstart=dtstart, cache=False)
    assert isinstance(rule, RRule)
    return rule


def _rrule_slots(spec: ScheduleSpec, lower: datetime) -> Iterator[datetime]:
    tz = spec.tz
    near = lower.astimezone(tz).replace(tzinfo=None) - RRULE_SLACK
    rule = rrule_rule(spec, rrule_start(spec, lower), near)
    last = lower
    for wall in rule.xafter(near, inc=True):
        slot = localise(wall, tz)  # a skipped time: the end of the gap; a repeated one: its first copy
        if slot > last:
            last = slot
            yield slot


def _slots(spec: ScheduleSpec, after: datetime) -> Iterator[datetime]:
    """Every slot after `after` (exclusive), within start_at and end_at (inclusive), earliest first."""
    lower = _utc(after, "after")
    if spec.start_at is not None and spec.start_at - _US > lower:
        lower = spec.start_at - _US
    source = {"cron": _cron_slots, "every_seconds": _interval_slots, "rrule": _rrule_slots}[spec.kind]
    for slot in source(spec, lower):
        if spec.end_at is not None and slot > spec.end_at:
            return
        yield slot


def slots_after(spec: ScheduleSpec, after: datetime, count: int) -> list[datetime]:
    """The next `count` slots after `after` (exclusive), earliest first; fewer if the schedule ends."""
    return list(islice(_slots(spec, after), max(count, 0)))


def next_slot(spec: ScheduleSpec, after: datetime) -> datetime | None:
    """The first slot after `after` (exclusive), or None if there is none."""
    return next(_slots(spec, after), None)


def slots_between(spec: ScheduleSpec, after: datetime, until: datetime, limit: int) -> list[datetime]:
    """The slots s with after < s <= until, earliest first, at most `limit`."""
    until = _utc(until, "until")
    return list(islice(takewhile(lambda s: s <= until, _slots(spec, after)), max(limit, 0)))


def count_between(spec: ScheduleSpec, after: datetime, until: datetime, cap: int = COUNT_CAP) -> int:
    """How many slots s with after < s <= until. Exact arithmetic for intervals (any size); cron and rrule
    slots are counted one by one up to `cap`: an answer equal to `cap` means "at least that many"."""
    after, until = _utc(after, "after"), _utc(until, "until")
    if spec.every_seconds is None:
        return sum(1 for _ in islice(takewhile(lambda s: s <= until, _slots(spec, after)), max(cap, 0)))
    if spec.start_at is not None:
        after = max(after, spec.start_at - _US)
    if spec.end_at is not None:
        until = min(until, spec.end_at)
    if until <= after:
        return 0
    step = round(spec.every_seconds * 1_000_000)
    anchor = _micros(spec.start_at) if spec.start_at is not None else 0
    first = (_micros(after) - anchor) // step + 1
    last = (_micros(until) - anchor) // step
    return max(0, last - first + 1)


def jitter(spec: ScheduleSpec, schedule_id: str, slot: datetime, next_slot: datetime | None = None) -> float:
    """Seconds to delay `slot` by, in [0, jitter_seconds]: the same on every replica (a hash of the schedule
    id and the slot), and below 90% of the gap to `next_slot` when given, so a slot never passes the next."""
    bound = spec.jitter_seconds
    if next_slot is not None:
        bound = min(bound, 0.9 * (_utc(next_slot, "next_slot") - _utc(slot, "slot")).total_seconds())
    if bound <= 0:
        return 0.0
    digest = hashlib.sha256(f"{schedule_id}:{describe_slot(slot)}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64  # in [0, 1)
    return min(round(fraction * bound, 6), bound)


# -- preview ---------------------------------------------------------------------------------------------


def _local(slot: datetime, tz: tzinfo) -> str:
    local = slot.astimezone(tz)
    return local.isoformat(timespec="microseconds" if local.microsecond else "seconds")


def preview(spec: ScheduleSpec, count: int = 10, *, start: datetime) -> dict[str, Any]:
    """The next `count` fires after `start` in UTC and in the schedule's zone, the schedule in words, and
    warnings (sub-minute intervals, slots moved or merged by DST changes, a phase that depends on `start`)."""
    start = _utc(start, "start")
    fires = slots_after(spec, start, count)
    tz = spec.tz
    warnings = []
    if spec.every_seconds is not None:
        warnings += sub_minute_warning(spec.every_seconds)
        if spec.jitter_seconds > 0.9 * spec.every_seconds:
            warnings.append(f"jitter_seconds ({spec.jitter_seconds:g}) is cut to 90% of the interval "
                            f"({every_words(spec.every_seconds)[6:]})")
    if spec.rrule is not None and spec.start_at is None:
        warnings += _phase_warning(spec)
    if not fires and count > 0:
        ended = spec.end_at is not None and spec.end_at <= start
        warnings.append(f"no fires after {describe_slot(start)}"
                        + (f": the schedule ended at {describe_slot(spec.end_at)}" if ended and spec.end_at else ""))
    warnings += _dst_warnings(spec, start, fires, MAX_WARNINGS - len(warnings))
    return {
        "fires": [{"at": describe_slot(s), "local": _local(s, tz)} for s in fires],
        "description": describe(spec, rrule_start(spec, start) if spec.rrule is not None else None),
        "warnings": warnings[:MAX_WARNINGS],
        "timezone": spec.timezone,
    }


def _phase_warning(spec: ScheduleSpec) -> list[str]:
    assert spec.rrule is not None
    parts = rrule_parts(spec.rrule)
    freq = parts["FREQ"].upper()
    days = {"BYMONTHDAY", "BYDAY", "BYYEARDAY", "BYWEEKNO"}
    loose = ((freq == "WEEKLY" and "BYDAY" not in parts)
             or (freq == "MONTHLY" and not days & parts.keys())
             or (freq == "YEARLY" and not (days | {"BYMONTH"}) & parts.keys()))
    if not loose:
        return []
    return ["without start_at, this rule counts from the time it is asked about (its day or phase moves): "
            "give start_at to pin it"]


def transitions(tz: tzinfo, begin: datetime, end: datetime) -> list[tuple[datetime, timedelta, timedelta]]:
    """The UTC offset changes of `tz` in (begin, end]: (instant in UTC, offset before, offset after)."""
    def offset(seconds: int) -> timedelta:
        return (EPOCH + timedelta(seconds=seconds)).astimezone(tz).utcoffset() or timedelta(0)

    found: list[tuple[datetime, timedelta, timedelta]] = []
    t, stop, day = int(begin.timestamp()), int(end.timestamp()) + 1, 86400
    before = offset(t)
    while t < stop:
        nxt = min(t + day, stop)
        after = offset(nxt)
        if after != before:
            lo, hi = t, nxt
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if offset(mid) == before else (lo, mid)
            found.append((EPOCH + timedelta(seconds=hi), before, after))
            before = after
        t = nxt
    return found


def _nominal(spec: ScheduleSpec, start: datetime, wall_from: datetime, wall_to: datetime) -> list[datetime]:
    """The schedule's naive wall-clock times in [wall_from, wall_to), before any DST normalising."""
    found: list[datetime] = []
    if spec.cron is not None:
        for wall in CronSim(spec.cron, wall_from - timedelta(seconds=1)):
            if wall >= wall_to or len(found) >= 10_000:
                break
            found.append(wall)
    elif spec.rrule is not None:
        rule = rrule_rule(spec, rrule_start(spec, start), wall_from - RRULE_SLACK)
        found = [w for w in rule.between(wall_from, wall_to, inc=True) if w < wall_to]
    return found


def _clock(wall: datetime) -> str:
    return wall.strftime("%H:%M:%S" if wall.second else "%H:%M")


def _dst_warnings(spec: ScheduleSpec, start: datetime, fires: list[datetime], room: int) -> list[str]:
    tz = spec.tz
    if spec.every_seconds is not None or tz is UTC or room <= 0:
        return []
    begin = max(start, spec.start_at) if spec.start_at is not None else start
    end = fires[-1] if fires else begin
    if spec.cron is not None and not spec.cron.split()[1].startswith("*"):
        end = max(end, start + timedelta(days=DST_SCAN_DAYS))
    if spec.end_at is not None:
        end = min(end, spec.end_at)
    end = min(end, begin + timedelta(days=5 * DST_SCAN_DAYS))
    moved = spec.rrule is not None or (spec.cron is not None and cron_is_specific(spec.cron))
    warnings = []
    for moment, before, after in transitions(tz, begin, end) if end > begin else []:
        gap = after > before
        wall = moment.replace(tzinfo=None)
        wall_from, wall_to = (wall + before, wall + after) if gap else (wall + after, wall + before)
        nominal = _nominal(spec, start, wall_from, wall_to)
        if not nominal:
            continue
        many = len(nominal) > 1
        if len(nominal) <= 2:
            times = " and ".join(_clock(w) for w in nominal)
        else:
            times = f"{_clock(nominal[0])} to {_clock(nominal[-1])} ({len(nominal)} times)"
        first = nominal[0].date().isoformat()
        name_before = (moment - timedelta(seconds=1)).astimezone(tz).tzname()
        name_after = moment.astimezone(tz).tzname()
        if gap:
            head = f"{first}: {times} {'do' if many else 'does'} not exist in {spec.timezone} (clocks go forward)"
            if moved:
                fire = localise(nominal[0], tz).astimezone(tz)
                tail = f"{'they fire once' if many else 'it fires'} at {_clock(fire.replace(tzinfo=None))} {fire.tzname()}"
            else:
                tail = "they are skipped" if many else "it is skipped"
        else:
            head = f"{first}: {times} {'happen' if many else 'happens'} twice in {spec.timezone} (clocks go back)"
            if moved:
                tail = (f"each fires once, in {name_before}" if many
                        else f"it fires once, at {_clock(nominal[0])} {name_before}")
            else:
                tail = f"{'they fire' if many else 'it fires'} both times ({name_before} and {name_after})"
        warnings.append(f"{head}; {tail}")
        if len(warnings) >= room:
            break
    return warnings
