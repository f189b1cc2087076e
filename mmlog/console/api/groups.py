"""The Groups page's API: a searchable page of consumer groups, one group's members, offsets, lag and lag
history, and resetting its offsets (a dry run, then applying it)."""

from __future__ import annotations

from mmlog.console import group_reset, groups
from mmlog.console.errors import ConsoleError
from mmlog.console.paging import page
from mmlog.console.router import Routes

routes = Routes()


@routes.get("/groups")
def group_list(call) -> dict:
    admin = call.session.admin()
    found = page(list(admin.list_groups()), call, sort=str)
    found["items"] = groups.group_rows(admin, found["items"])
    return found


@routes.get("/groups/{group}")
def group_detail(call) -> dict:
    group = call.params["group"]
    detail = groups.group_detail(call.session.admin(), group)
    sampler = call.console.lag_sampler
    if sampler is not None:
        sampler.viewed(group, detail["lag"])
    return detail


@routes.get("/groups/{group}/lag")
def lag_history(call) -> dict:
    """The group's total lag over the last hour, as sampled (describing it first: the ACLs decide)."""
    group = call.params["group"]
    call.session.admin().describe_group(group)
    sampler = call.console.lag_sampler
    if sampler is None:
        return {"group": group, "points": []}
    sampler.viewed(group)
    return {"group": group, "points": [[round(t, 3), lag] for t, lag in sampler.history.series(group)]}


@routes.post("/groups/{group}/reset/plan")
def reset_plan(call) -> dict:
    body = call.body
    topics = body.get("topics") or None
    if topics is not None and not (isinstance(topics, list) and all(isinstance(t, str) for t in topics)):
        raise ConsoleError(400, "INVALID_REQUEST", "topics: a list of topic names")
    return _reset(lambda: group_reset.plan(call.session.admin(), call.params["group"], str(body.get("target", "")),
                                           body.get("value"), topics))


@routes.post("/groups/{group}/reset/apply")
def reset_apply(call) -> dict:
    offsets = call.body.get("offsets")
    if not isinstance(offsets, list):
        raise ConsoleError(400, "INVALID_REQUEST", "offsets: the dry run's [{topic, partition, new}]")
    return _reset(lambda: group_reset.apply(call.session.admin(), call.params["group"], offsets))


def _reset(action) -> dict:
    try:
        return action()
    except group_reset.ResetRefused as exc:
        raise ConsoleError(409, "NON_EMPTY_GROUP", str(exc)) from None
    except group_reset.InvalidReset as exc:
        raise ConsoleError(400, "INVALID_REQUEST", str(exc)) from None
