"""Cron lines, read the way Kubernetes' CronJob controller reads them (robfig/cron's standard
parser), for every cron line of the operator's specs: an EtcdBackup's spec.schedule (when its
CronJob fires next, for status.nextScheduleTime) and an EtcdCluster's
spec.defragmentation.schedule (when a defragmentation window opens). One dialect, so one line
means the same wherever it is written."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import NamedTuple
from zoneinfo import ZoneInfo

# Five fields or a macro, `*` and `?`, numbers, ranges, steps, lists, month and weekday names.
# For an EtcdBackup the CronJob controller is the clock: a line this cannot read, or an unknown
# zone, gives "" and the status leaves the field out (the CRD's pattern and the API server's
# CronJob validation are the ones that refuse a spec).

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_WEEKDAYS = {
    name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))
}
_DIGITS = re.compile(r"[0-9]+")
# Nine years of days: Feb 29 can be eight years away (2096, then 2104), and a line that has
# not fired in that time never will (Feb 30, Apr 31).
SEARCH_DAYS = 9 * 366
RFC3339 = "%Y-%m-%dT%H:%M:%SZ"


class _Field(NamedTuple):
    low: int
    high: int
    # Where `*` and `N/step` end: weekday 7 is Sunday as in most crons, but `*/2` stops at 6.
    # (The CronJob controller's parser refuses 7; reading it costs nothing.)
    open_high: int
    names: dict[str, int]


# Minute, hour, day of month, month, day of week.
_FIELDS = (
    _Field(0, 59, 59, {}),
    _Field(0, 23, 23, {}),
    _Field(1, 31, 31, {}),
    _Field(1, 12, 12, _MONTHS),
    _Field(0, 7, 6, _WEEKDAYS),
)


class Cron(NamedTuple):
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    # Both day fields restricted: a day matching either fires (cron's rule), else both must.
    either_day: bool


def _number(text: str) -> int:
    # Plain ASCII digits: int() would also take "+5", "1_0" and other scripts' digits.
    if not _DIGITS.fullmatch(text):
        raise ValueError(text)
    return int(text)


def _value(text: str, field: _Field) -> int:
    named = field.names.get(text.lower())
    return _number(text) if named is None else named


def _cron_field(text: str, field: _Field) -> tuple[frozenset[int], bool]:
    """The values one field allows, and whether it restricts at all (a bare `*` or `?`
    anywhere in the list does not: that decides the day-of-month/day-of-week rule)."""
    values: set[int] = set()
    restricted = True
    # Empty list items are skipped, as the CronJob controller's parser does.
    items = [item for item in text.split(",") if item]
    if not items:
        raise ValueError(text)
    for item in items:
        span, slash, step_text = item.partition("/")
        step = _number(step_text) if slash else 1
        if span in ("*", "?"):
            first, last = field.low, field.open_high
            restricted = restricted and step > 1
        else:
            ends = span.split("-")
            if len(ends) > 2:
                raise ValueError(item)
            first = _value(ends[0], field)
            # `N/step` runs from N to the end of the field.
            last = _value(ends[1], field) if len(ends) == 2 else field.open_high if slash else first
        if step < 1 or not field.low <= first <= last <= field.high:
            raise ValueError(item)
        values.update(range(first, last + 1, step))
    return frozenset(values), restricted


def schedule_problem(line: str, field: str = "spec.schedule") -> str:
    """Why the CronJob controller would refuse this line, naming `field`; empty when it takes
    it. Its parser knows no weekday 7 (which parse_cron reads as Sunday, as most crons do):
    refused here, naming the field, rather than as a failed write of the CronJob. Other cron
    lines of the operator's specs (spec.defragmentation.schedule) are held to the same
    dialect, so one line means the same wherever it is written."""
    if parse_cron(line) is None:
        return f"{field} {line!r} is not a cron line (five fields, or a macro such as @daily)"
    fields = MACROS.get(line.strip(), line).split()
    try:
        _cron_field(fields[4], _Field(0, 6, 6, _WEEKDAYS))
    except ValueError:
        return (
            f"{field} {line!r}: the operator's cron lines take days of the week 0-6, as a "
            "CronJob does; write 0 or SUN for Sunday"
        )
    return ""


def parse_cron(line: str) -> Cron | None:
    """The five fields of a cron line or macro; None for what cannot be read."""
    fields = MACROS.get(line.strip(), line).split()
    if len(fields) != len(_FIELDS):
        return None
    try:
        parsed = [_cron_field(text, field) for text, field in zip(fields, _FIELDS, strict=True)]
    except ValueError:
        return None
    (minutes, _), (hours, _), (days, dom_restricted), (months, _), (weekdays, dow_restricted) = (
        parsed
    )
    return Cron(
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=days,
        months=months,
        weekdays=frozenset(d % 7 for d in weekdays),
        either_day=dom_restricted and dow_restricted,
    )


def _day_matches(cron: Cron, day: date) -> bool:
    if day.month not in cron.months:
        return False
    by_date = day.day in cron.days
    by_weekday = day.isoweekday() % 7 in cron.weekdays
    return by_date or by_weekday if cron.either_day else by_date and by_weekday


def _instant(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime | None:
    """The UTC instant of a wall-clock time in `zone`, or None when the clocks jump over it.
    A time the clocks pass twice (they go back) is its first pass only (fold=0), so a daily
    line fires once that night; an hourly or finer one is quiet for the repeated hour."""
    local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
    instant = local.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) != local.replace(tzinfo=None):
        return None
    return instant


def zone_info(name: str) -> ZoneInfo | None:
    """An IANA zone; unset is UTC. Kubernetes uses the controller manager's own zone for a
    CronJob without timeZone, which the operator cannot see: it assumes UTC, what that zone
    usually is."""
    try:
        return ZoneInfo(name or "UTC")
    except (ValueError, LookupError, OSError):  # a malformed or unknown name, or a directory
        return None


def next_run(line: str, time_zone: str, after: datetime) -> datetime | None:
    """The first instant (UTC) after `after` (aware) at which the line fires in `time_zone`;
    None if it cannot be read or does not fire within SEARCH_DAYS."""
    cron, zone = parse_cron(line), zone_info(time_zone)
    if cron is None or zone is None:
        return None
    # A later instant never has an earlier first-pass local date: start on after's date.
    start = after.astimezone(zone).date().toordinal()
    for ordinal in range(start, min(start + SEARCH_DAYS, date.max.toordinal() + 1)):
        day = date.fromordinal(ordinal)
        if not _day_matches(cron, day):
            continue
        for hour in cron.hours:
            for minute in cron.minutes:
                instant = _instant(day, hour, minute, zone)
                if instant is not None and instant > after:
                    return instant
    return None


def next_schedule_time(line: str, time_zone: str, now: str) -> str:
    """next_run from and to RFC 3339 UTC text (`%Y-%m-%dT%H:%M:%SZ`); "" for no answer."""
    try:
        after = datetime.strptime(now, RFC3339).replace(tzinfo=UTC)
    except ValueError:
        return ""
    upcoming = next_run(line, time_zone, after)
    return upcoming.strftime(RFC3339) if upcoming else ""
