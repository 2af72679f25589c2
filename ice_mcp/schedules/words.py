"""A schedule spec in words: cron-descriptor for cron, plain sentences for intervals and rrules."""

from __future__ import annotations

from datetime import datetime
from itertools import product

from cronsim import CronSim

from ice_mcp.schedules.spec import ScheduleSpec, describe_slot, rrule_parts

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
WEEKDAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
_FREQ_WORDS = {"YEARLY": ("yearly", "years"), "MONTHLY": ("monthly", "months"), "WEEKLY": ("weekly", "weeks"),
               "DAILY": ("daily", "days"), "HOURLY": ("hourly", "hours"), "MINUTELY": ("every minute", "minutes"),
               "SECONDLY": ("every second", "seconds")}
_SHOWN = {"FREQ", "INTERVAL", "BYMONTH", "BYMONTHDAY", "BYDAY", "BYHOUR", "BYMINUTE", "BYSECOND", "BYSETPOS", "COUNT",
          "UNTIL"}


def every_words(seconds: float) -> str:
    """An interval in words: "every 5 minutes", "every hour", "every 90 seconds"."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"every {unit}" if n == 1 else f"every {n} {unit}s"
    if seconds == 1:
        return "every second"
    return f"every {int(seconds) if float(seconds).is_integer() else seconds} seconds"


def sub_minute_warning(seconds: float) -> list[str]:
    if seconds >= 60:
        return []
    return [f"fires {every_words(seconds)}: {86400 / seconds:,.0f} runs a day; make sure that is intended"]


def _cron_words(expr: str) -> str:
    # cron-descriptor's locale tables load when a schedule is described, not at every start-up.
    from cron_descriptor import get_description

    try:
        return str(get_description(expr))
    except Exception:  # an expression cronsim takes and cron-descriptor does not
        try:
            return f"cron {expr!r}: {CronSim(expr, datetime(2000, 1, 1)).explain()}"
        except Exception:
            return f"cron {expr!r}"


def _ints(value: str) -> list[int]:
    try:
        return sorted({int(v) for v in value.split(",") if v.strip()})
    except ValueError:
        return []


def _rrule_words(rule: str, dtstart: datetime) -> str:
    parts = rrule_parts(rule)
    freq = parts["FREQ"].upper()
    single, plural = _FREQ_WORDS[freq]
    interval = int(parts.get("INTERVAL") or 1)
    bits = [single if interval == 1 else f"every {interval} {plural}"]
    if "BYMONTH" in parts:
        bits.append("in " + ", ".join(MONTHS[m - 1] for m in _ints(parts["BYMONTH"]) if 1 <= m <= 12))
    if "BYMONTHDAY" in parts:
        days = _ints(parts["BYMONTHDAY"])
        bits.append("on " + ", ".join("the last day" if d == -1 else f"day {d}" for d in days))
    if "BYDAY" in parts:
        bits.append("on " + ", ".join(d.strip().upper() for d in parts["BYDAY"].split(",")))
    elif freq == "WEEKLY":
        bits.append(f"on {WEEKDAYS[dtstart.weekday()]}")
    elif freq == "MONTHLY" and not {"BYMONTHDAY", "BYYEARDAY", "BYWEEKNO"} & parts.keys():
        bits.append(f"on day {dtstart.day}")
    elif freq == "YEARLY" and not {"BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO"} & parts.keys():
        bits.append(f"on {MONTHS[dtstart.month - 1]} {dtstart.day}")
    hours = _ints(parts.get("BYHOUR", "")) or [dtstart.hour]
    minutes = _ints(parts.get("BYMINUTE", "")) or [dtstart.minute]
    seconds = _ints(parts.get("BYSECOND", "")) or [dtstart.second]
    if freq in ("YEARLY", "MONTHLY", "WEEKLY", "DAILY"):
        times = [f"{h:02d}:{m:02d}" + (f":{s:02d}" if s else "") for h, m, s in product(hours, minutes, seconds)]
        bits.append("at " + ", ".join(times) if len(times) <= 4 else f"at {len(times)} times a day, {times[0]} to {times[-1]}")
    else:
        if "BYHOUR" in parts:
            bits.append("in hours " + ", ".join(f"{h:02d}" for h in hours))
        if freq == "HOURLY" or "BYMINUTE" in parts:
            bits.append(("at minute " if freq == "HOURLY" else "in minutes ") + ", ".join(map(str, minutes)))
        if freq != "SECONDLY" and (seconds != [0] or "BYSECOND" in parts):
            bits.append("at second " + ", ".join(map(str, seconds)))
    if "BYSETPOS" in parts:
        positions = _ints(parts["BYSETPOS"])
        period = {"YEARLY": "year", "MONTHLY": "month", "WEEKLY": "week"}.get(freq, "day")
        bits.append(f"(only the last of each {period})" if positions == [-1] else
                    f"(only the first of each {period})" if positions == [1] else
                    f"(only positions {', '.join(map(str, positions))} of each {period})")
    bits += [f"{k}={v}" for k, v in parts.items() if k not in _SHOWN]
    if "COUNT" in parts:
        bits.append(f"{parts['COUNT']} times")
    if "UNTIL" in parts:
        bits.append(f"until {parts['UNTIL']}")
    return "RRULE: " + " ".join(bits)


def describe(spec: ScheduleSpec, rrule_dtstart: datetime | None = None) -> str:
    """The schedule in one honest sentence; `rrule_dtstart` (naive wall clock) fills what an rrule leaves open."""
    if spec.every_seconds is not None:
        text = every_words(spec.every_seconds)
        if spec.start_at is not None:
            text += f", counted from {describe_slot(spec.start_at)}"
    elif spec.cron is not None:
        text = f"{_cron_words(spec.cron)} ({spec.timezone})"
    else:
        assert spec.rrule is not None
        text = f"{_rrule_words(spec.rrule, rrule_dtstart or datetime(2000, 1, 1))} ({spec.timezone})"
    if spec.start_at is not None and spec.every_seconds is None:
        text += f", from {describe_slot(spec.start_at)}"
    if spec.end_at is not None:
        text += f", until {describe_slot(spec.end_at)}"
    return text
