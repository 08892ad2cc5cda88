"""The aiokafka workers' assignor: same-numbered partitions together, sticky, balanced, and a
moving task goes to the member with its most caught-up standby (KIP-441's preference)."""
from __future__ import annotations

import orjson
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

from streamkit.transport.task_assignor import TaskAssignor, plan

COUNTS = {"clicks": 6, "views": 6, "app-__leader": 1}
TOPICS = sorted(COUNTS)


def member(owned=(), standby=None):
    return TOPICS, {"owned": [list(tp) for tp in owned], "standby": standby or {}}


def numbers(assignment, topic="clicks"):
    return sorted(assignment.get(topic, []))


def test_a_fresh_group_is_balanced_and_co_partitioned():
    out = plan({"a": member(), "b": member(), "c": member()}, COUNTS)
    for assignment in out.values():
        assert numbers(assignment, "clicks") == numbers(assignment, "views")  # partition p together
    assert sorted(len(a.get("clicks", [])) + len(a.get("app-__leader", [])) for a in out.values()) == [2, 2, 3]
    assert sorted(p for a in out.values() for p in a.get("clicks", [])) == list(range(6))


def test_a_joining_member_takes_only_what_must_move_and_the_rest_stays():
    before = {"a": member([("clicks", p) for p in range(6)] + [("views", p) for p in range(6)] + [("app-__leader", 0)])}
    assert numbers(plan(before, COUNTS)["a"]) == list(range(6))
    after = plan({**before, "b": member()}, COUNTS)
    kept, moved = numbers(after["a"]), numbers(after["b"])
    assert set(kept) | set(moved) == set(range(6)) and not set(kept) & set(moved)
    assert len(kept) + len(after["a"].get("app-__leader", [])) == 4  # the holder keeps the extra task
    assert after["a"].get("app-__leader") == [0]


def test_a_leaving_members_tasks_go_to_their_caught_up_standbys_and_the_others_stay():
    # c owned 4 and 5 and left; a keeps warm copies of 4 (far behind) and 5; b of 4 (caught up)
    a = member([("clicks", 0), ("views", 0), ("clicks", 1), ("views", 1), ("app-__leader", 0)],
               standby={"6:4": 10, "6:5": 500})
    b = member([("clicks", 2), ("views", 2), ("clicks", 3), ("views", 3)], standby={"6:4": 900})
    out = plan({"a": a, "b": b}, COUNTS)
    assert numbers(out["a"]) == [0, 1, 5] and numbers(out["b"]) == [2, 3, 4]
    assert numbers(out["b"], "views") == [2, 3, 4]


def test_a_full_standby_holder_does_not_unbalance_the_group():
    a = member([("clicks", 0), ("views", 0), ("clicks", 1), ("views", 1), ("clicks", 2), ("views", 2)],
               standby={"6:3": 100, "6:4": 100, "6:5": 100})
    out = plan({"a": a, "b": member()}, COUNTS)
    sizes = sorted(len(x.get("clicks", [])) + len(x.get("app-__leader", [])) for x in out.values())
    assert sizes == [3, 4]
    assert numbers(out["a"])[:3] == [0, 1, 2]  # sticky


def test_the_aiokafka_assignor_round_trips_the_member_state():
    class Cluster:
        def partitions_for_topic(self, topic):
            return set(range(COUNTS[topic])) if topic in COUNTS else None

    assignor = TaskAssignor()
    assignor.state = lambda: {"owned": [["clicks", 3]], "standby": {}}
    meta = assignor.metadata(TOPICS)
    assert orjson.loads(meta.user_data)["owned"] == [["clicks", 3]]
    other = ConsumerProtocolMemberMetadata(0, TOPICS, b"")  # an older worker: no state
    result = assignor.assign(Cluster(), {"m1": meta, "m2": other})
    by_member = {m: dict(a.assignment) for m, a in result.items()}
    assert 3 in by_member["m1"]["clicks"]
    assert sorted(by_member["m1"]["clicks"] + by_member["m2"]["clicks"]) == list(range(6))

    def broken():
        raise RuntimeError("no state yet")

    assignor.state = broken
    assert orjson.loads(assignor.metadata(TOPICS).user_data) == {}
