"""What a schedule is at the boundary: its spec and policy models, checked with every problem listed at once.

Pure: no I/O and no clock. Times in a spec are aware instants, kept in UTC; a naive one is read in the
spec's `timezone` (a time skipped by a DST change moves to the end of the gap, a repeated one is the first).
"""

from __future__ import annotations

import functools
import math
import zoneinfo
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Literal, NoReturn, TypeVar

from cronsim import CronSim
from dateutil.rrule import rrule as RRule
from dateutil.rrule import rrulestr
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ice_mcp.blueprint.issues import nearest
from ice_mcp.errors import IceError

KINDS = ("cron", "every_seconds", "rrule")
CRON_FIELDS = "minute hour day-of-month month day-of-week"
CRON_ALIASES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
RRULE_FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
_INSTANT = TypeAdapter(datetime)


class ScheduleInvalid(IceError):
    """A schedule spec or policy with problems; `details["errors"]` lists every one as {path, message}."""

    code = "invalid_schedule"


# -- zones ------------------------------------------------------------------------------------------


@functools.cache
def zone_names() -> frozenset[str]:
    """Every IANA zone name this machine knows (system zone data or the tzdata package): ~6 ms to list, so only
    suggestions read it; `known_zone` checks one name."""
    return frozenset(zoneinfo.available_timezones())


@functools.lru_cache(maxsize=1024)
def known_zone(name: str) -> bool:
    """Whether `name` is one of `zone_names()`, by loading that zone alone (what the listing does for each file:
    zone data that loads, outside `posix/` and `right/`, and not `posixrules`)."""
    if not isinstance(name, str) or name.split("/", 1)[0] in ("posix", "right") or name == "posixrules":
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # not found (a KeyError), a malformed key, a folder
        return False
    return True


def zone(name: str) -> tzinfo:
    """The zone of a checked spec's `timezone`."""
    return UTC if name == "UTC" else zoneinfo.ZoneInfo(name)


def zone_suggestions(name: str, count: int = 3) -> list[str]:
    """Up to `count` known zone names nearest to `name` (same name in other case, same city, then spelling)."""
    names = zone_names()
    key = name.strip().replace(" ", "_").lower()
    city = key.rsplit("/", 1)[-1]
    found = sorted(z for z in names if z.lower() == key)
    found += sorted(z for z in names if z.lower().rsplit("/", 1)[-1] == city and z not in found)
    pool = set(names) - set(found)
    while len(found) < count:
        match = nearest(name, pool)
        if match is None:
            break
        found.append(match)
        pool.discard(match)
    return found[:count]


def unknown_zone_message(name: str) -> str:
    suggestions = zone_suggestions(name)
    if suggestions:
        return f"unknown time zone {name!r}; did you mean {', '.join(suggestions)}?"
    return f"unknown time zone {name!r}; use an IANA name such as Europe/Paris, America/New_York or UTC"


def exists(wall: datetime, where: tzinfo) -> bool:
    """Whether the naive wall-clock time `wall` happens in `where` (False inside a DST gap)."""
    aware = wall.replace(tzinfo=where, fold=0)
    return aware.astimezone(UTC).astimezone(where).replace(tzinfo=None) == wall


def localise(wall: datetime, where: tzinfo) -> datetime:
    """The instant (UTC) of naive wall-clock `wall` in `where`: a skipped time moves to the end of the gap
    (the first whole minute that exists, as Debian cron does), a repeated one is its first occurrence."""
    wall = wall.replace(tzinfo=None, fold=0)
    if exists(wall, where):
        return wall.replace(tzinfo=where).astimezone(UTC)
    probe = wall.replace(second=0, microsecond=0)
    for _ in range(2 * 24 * 60):  # the longest gap on record is a day (Samoa, 2011)
        probe += timedelta(minutes=1)
        if exists(probe, where):
            return probe.replace(tzinfo=where).astimezone(UTC)
    return wall.replace(tzinfo=where).astimezone(UTC)


# -- slot strings and instants ----------------------------------------------------------------------


def describe_slot(dt: datetime) -> str:
    """An instant as ISO 8601 in UTC with `Z`, to the second (fractions only when not zero)."""
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"a slot must be an aware datetime, not naive {dt.isoformat()}")
    utc = dt.astimezone(UTC)
    return utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds").replace("+00:00", "Z")


def instant(ts: float) -> datetime:
    """Unix seconds (as the run store keeps slots) as an aware UTC datetime."""
    return datetime.fromtimestamp(ts, UTC)


def slot_text(ts: float | None) -> str | None:
    """Unix seconds as `describe_slot` writes them; None stays None."""
    return None if ts is None else describe_slot(instant(ts))


def parse_instant(value: str | datetime, *, path: str = "instant") -> datetime:
    """An ISO 8601 text or a datetime as an aware UTC datetime; a naive one is read as UTC."""
    parsed: datetime | None = value if isinstance(value, datetime) else None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            parsed = None
    if parsed is None:
        message = f"invalid instant {value!r}: expected ISO 8601 such as 2026-11-30T08:00:00Z"
        raise ScheduleInvalid(message, details={"errors": [{"path": path, "message": message}]})
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


# -- cron and rrule text ----------------------------------------------------------------------------


def cron_problem(expr: str) -> str | None:
    """Why a cron expression is refused, or None: five fields in cronsim's syntax."""
    text = " ".join(expr.split())
    if not text:
        return f"cron is empty; give 5 fields: {CRON_FIELDS}"
    if text.startswith("@"):
        alias = CRON_ALIASES.get(text.lower())
        hint = f"; write {alias!r} instead" if alias else ""
        return f"cron {text!r}: @-shortcuts are not supported{hint}"
    count = len(text.split())
    if count != 5:
        extra = " (a seconds field is not supported)" if count == 6 else ""
        return f"cron {text!r} has {count} fields; give 5: {CRON_FIELDS}{extra}"
    try:
        CronSim(text, datetime(2000, 1, 1))
    except Exception as exc:  # cronsim says CronSimError; anything else is a refusal too
        return f"invalid cron {text!r}: {exc}"
    return None


def rrule_body(text: str) -> str:
    """The rule part of a checked `rrule` (without the `RRULE:` prefix)."""
    line = text.strip()
    return line[6:].strip() if line.upper().startswith("RRULE:") else line


def rrule_parts(text: str) -> dict[str, str]:
    """A checked rule's NAME=value parts, names upper-case."""
    parts: dict[str, str] = {}
    for item in rrule_body(text).split(";"):
        name, _, value = item.partition("=")
        if name.strip():
            parts[name.strip().upper()] = value.strip()
    return parts


@functools.lru_cache(maxsize=1024)
def rrule_problem(text: str) -> str | None:
    """Why an `rrule` is refused, or None: one RRULE line that dateutil reads, with days that exist.

    dateutil looks for a next occurrence up to the year 9999, so a rule that never fires would stall every
    look-up: days no calendar has (BYMONTH=2;BYMONTHDAY=30), and BYSETPOS past what a period holds, are refused.
    """
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "rrule is empty; give one rule such as 'RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0'"
    if len(lines) > 1 or not lines[0].upper().startswith(("RRULE:", "FREQ=")):
        return ("give one RRULE line (no DTSTART, RDATE or EXDATE): the start is `start_at`, "
                "the end `end_at`")
    parts = rrule_parts(lines[0])
    freq = parts.get("FREQ", "").upper()
    if freq not in RRULE_FREQS:
        return f"rrule needs FREQ, one of {', '.join(RRULE_FREQS)}"
    if parts.get("UNTIL", "").upper().endswith("Z"):
        return "rrule UNTIL is read in the schedule's zone: drop the 'Z', or use `end_at`"
    probe = datetime(2000, 1, 1)
    try:
        if not isinstance(rrulestr(rrule_body(lines[0]), dtstart=probe), RRule):
            return "give one RRULE line"
        if "BYSETPOS" in parts:
            problem = _setpos_problem(parts, freq)
            if problem:
                return problem
        days = [f"{k}={_plain_days(v) if k == 'BYDAY' and freq not in ('YEARLY', 'MONTHLY') else v}"
                for k, v in parts.items() if k in DAY_PARTS]
        if days:  # a day that exists, looked for year by year (month by month): fast even when there is none
            proxy = rrulestr(";".join([f"FREQ={freq if freq in ('YEARLY', 'MONTHLY') else 'YEARLY'}", *days]),
                             dtstart=probe)
            if proxy.after(probe, inc=True) is None:
                return f"rrule {text.strip()!r} never fires: no day matches {';'.join(days)}"
    except Exception as exc:  # dateutil raises ValueError, TypeError, KeyError...
        return f"invalid rrule {text.strip()!r}: {exc}"
    return None


DAY_PARTS = ("BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYDAY", "BYEASTER", "WKST")
_PERIOD_DAYS = {"YEARLY": 366, "MONTHLY": 31, "WEEKLY": 7, "DAILY": 1}


def _plain_days(value: str) -> str:
    return ",".join(day.strip().lstrip("+-0123456789") for day in value.split(","))


def _setpos_problem(parts: dict[str, str], freq: str) -> str | None:
    if freq not in _PERIOD_DAYS:
        return "rrule BYSETPOS needs FREQ=DAILY or longer"
    size = _PERIOD_DAYS[freq]
    for key in ("BYHOUR", "BYMINUTE", "BYSECOND"):
        size *= len([v for v in parts.get(key, "0").split(",") if v.strip()]) or 1
    for position in (int(v) for v in parts["BYSETPOS"].split(",") if v.strip()):
        if position == 0 or abs(position) > size:
            return (f"rrule BYSETPOS={position} is beyond the {size} candidate{'s' if size > 1 else ''} "
                    f"of each {freq.lower()} period")
    return None


@functools.lru_cache(maxsize=1024)
def rrule_fires(text: str, dtstart: datetime) -> bool:
    """Whether a checked rule has an occurrence from naive wall-clock `dtstart` on."""
    return rrulestr(rrule_body(text), dtstart=dtstart).after(dtstart, inc=True) is not None


# -- the models ---------------------------------------------------------------------------------------


def _cross_problems(present: list[str], start: datetime | None, end: datetime | None,
                    rrule: str | None, timezone: str) -> list[dict[str, str]]:
    """The problems between fields: one way of timing, an end after the start, a rule that counts from a start."""
    problems = []
    if not present:
        problems.append({"path": "", "message": "give one of cron, every_seconds or rrule"})
    elif len(present) > 1:
        problems.append({"path": "", "message": f"give only one of cron, every_seconds or rrule (got {' and '.join(present)})"})
    if start is not None and end is not None and end <= start:
        problems.append({"path": "end_at", "message": f"end_at ({describe_slot(end)}) must come after "
                                                      f"start_at ({describe_slot(start)})"})
    if isinstance(rrule, str) and rrule_problem(rrule) is None:
        parts = rrule_parts(rrule)
        counted = [k for k in ("COUNT", "INTERVAL") if k in parts and not (k == "INTERVAL" and int(parts[k]) == 1)]
        if start is None and counted:
            problems.append({"path": "rrule", "message": f"rrule {' and '.join(counted)} {'count' if len(counted) > 1 else 'counts'} from `start_at`: "
                                                         "give start_at"})
        elif start is not None:
            where = zone(timezone if known_zone(timezone) else "UTC")
            wall = start.astimezone(where).replace(tzinfo=None, microsecond=0)
            if not rrule_fires(rrule, wall):
                problems.append({"path": "rrule", "message": f"rrule never fires from start_at ({describe_slot(start)})"})
    return problems


class ScheduleSpec(BaseModel):
    """When a schedule fires: exactly one of `cron`, `every_seconds`, `rrule`, in `timezone`, between
    `start_at` and `end_at` (inclusive), each slot delayed by a deterministic jitter up to `jitter_seconds`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str | None = None  # "m h dom mon dow", wall clock in `timezone` (Debian cron's DST rules)
    every_seconds: float | None = None  # an absolute interval from `start_at`, or from the Unix epoch
    rrule: str | None = None  # "RRULE:FREQ=...", wall clock in `timezone`
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter_seconds: float = 0.0

    @field_validator("cron", "rrule")
    @classmethod
    def _rule(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A cron expression (its fields' spacing folded) or an iCalendar rule (stripped), checked."""
        if value is None:
            return None
        cron = info.field_name == "cron"
        problem = cron_problem(value) if cron else rrule_problem(value)
        if problem:
            raise ValueError(problem)
        return " ".join(value.split()) if cron else value.strip()

    @field_validator("every_seconds")
    @classmethod
    def _every(cls, value: float | None) -> float | None:
        if value is not None and (not math.isfinite(value) or value < 1):
            raise ValueError(f"must be at least 1 second (got {value:g}); sub-second schedules are not supported")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        if not known_zone(value):
            raise ValueError(unknown_zone_message(value))
        return value

    @field_validator("start_at", "end_at")
    @classmethod
    def _instant(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            return localise(value, zone(info.data.get("timezone") or "UTC"))
        return value.astimezone(UTC)

    @field_validator("jitter_seconds")
    @classmethod
    def _jitter(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"must be 0 or more (got {value:g})")
        return value

    @model_validator(mode="after")
    def _between_fields(self) -> ScheduleSpec:
        present = [k for k in KINDS if getattr(self, k) is not None]
        problems = _cross_problems(present, self.start_at, self.end_at, self.rrule, self.timezone)
        if problems:
            raise ValueError("; ".join(p["message"] for p in problems))
        return self

    @property
    def kind(self) -> Literal["cron", "every_seconds", "rrule"]:
        return "cron" if self.cron is not None else "every_seconds" if self.every_seconds is not None else "rrule"

    @property
    def tz(self) -> tzinfo:
        return zone(self.timezone)


class CatchUp(BaseModel):
    """What slots missed while nothing ran become: `latest`, `all` (at most `max_runs`) or `none`, if no
    later than `window_seconds` after their time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["latest", "all", "none"] = "latest"
    window_seconds: float = Field(default=86400.0, gt=0, allow_inf_nan=False)
    max_runs: int = Field(default=10, ge=1)


class SchedulePolicy(BaseModel):
    """What a slot does while an earlier run still runs (Temporal's overlap policies), catch-up, and pausing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    overlap: Literal["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"] = "skip"
    catchup: CatchUp = Field(default_factory=CatchUp)
    pause_on_failure: bool = False


# -- parsing with every problem at once ---------------------------------------------------------------


def _path(loc: tuple[Any, ...]) -> str:
    return ".".join(f"[{part}]" if isinstance(part, int) else str(part) for part in loc).replace(".[", "[")


def _problem(error: Mapping[str, Any], model: type[BaseModel]) -> dict[str, str]:
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "extra_forbidden":
        key = str(loc[-1]) if loc else "?"
        owner: type[BaseModel] = model
        for part in loc[:-1]:  # the nested model the key is in (catchup)
            annotation = owner.model_fields[str(part)].annotation if str(part) in owner.model_fields else None
            owner = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else owner
        known = list(owner.model_fields)
        suggestion = nearest(key, known)
        hint = f"did you mean {suggestion!r}?" if suggestion else f"known keys: {', '.join(known)}"
        return {"path": _path(loc), "message": f"unknown key {key!r}; {hint}"}
    if error.get("type") == "value_error" and "error" in error.get("ctx", {}):
        message = str(error["ctx"]["error"])
    else:
        message = str(error.get("msg", "invalid")).replace("Input should", "should")
    return {"path": _path(loc), "message": message}


M = TypeVar("M", bound=BaseModel)


def _raise(errors: list[dict[str, str]], what: str) -> NoReturn:
    def one(e: dict[str, str]) -> str:
        return f"{e['path']}: {e['message']}" if e["path"] else e["message"]

    if len(errors) == 1:
        message = f"invalid {what}: {one(errors[0])}"
    else:
        message = f"invalid {what} ({len(errors)} problems): " + " | ".join(one(e) for e in errors)
    raise ScheduleInvalid(message, details={"errors": errors})


def _lenient_instant(value: Any, timezone: Any) -> datetime | None:
    try:
        parsed = _INSTANT.validate_python(value)
    except ValidationError:
        return None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        return localise(parsed, zone(timezone if isinstance(timezone, str) and known_zone(timezone) else "UTC"))
    return parsed.astimezone(UTC)


def _validated(data: object, model: type[M], noun: str, what: str) -> M:
    """`data` as a `model`, validated if it is not one yet: ValidationError, or ScheduleInvalid when it is no
    object at all (`noun` names it in the message, `what` in the error)."""
    if isinstance(data, model):
        return data
    if not isinstance(data, Mapping):
        _raise([{"path": "", "message": f"a {noun} is an object, not {type(data).__name__}"}], what)
    return model.model_validate(dict(data))


def parse_spec(data: Mapping[str, Any] | ScheduleSpec) -> ScheduleSpec:
    """A checked ScheduleSpec, or ScheduleInvalid listing every problem in `details["errors"]`."""
    try:
        return _validated(data, ScheduleSpec, "schedule spec", "schedule")
    except ValidationError as exc:
        assert isinstance(data, Mapping)  # a ScheduleSpec is valid already
        errors = [_problem(e, ScheduleSpec) for e in exc.errors()
                  if not (e.get("loc") == () and e.get("type") == "value_error")]
        fallback = [_problem(e, ScheduleSpec) for e in exc.errors() if e.get("loc") == ()]
    present = [k for k in KINDS if data.get(k) is not None]
    rrule = data.get("rrule") if isinstance(data.get("rrule"), str) else None
    start = _lenient_instant(data.get("start_at"), data.get("timezone", "UTC")) if data.get("start_at") is not None else None
    end = _lenient_instant(data.get("end_at"), data.get("timezone", "UTC")) if data.get("end_at") is not None else None
    timezone = data.get("timezone", "UTC")
    crossed = _cross_problems(present, start, end, rrule, timezone if isinstance(timezone, str) else "UTC")
    errors += [p for p in crossed if p not in errors]
    _raise(errors or fallback, "schedule")


def parse_policy(data: Mapping[str, Any] | SchedulePolicy | None) -> SchedulePolicy:
    """A checked SchedulePolicy (the defaults for None), or ScheduleInvalid listing every problem."""
    if data is None:
        return SchedulePolicy()
    try:
        return _validated(data, SchedulePolicy, "schedule policy", "schedule policy")
    except ValidationError as exc:
        _raise([_problem(e, SchedulePolicy) for e in exc.errors()], "schedule policy")
