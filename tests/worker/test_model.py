"""The worker's promises, driven across paths nobody wrote down: a model-based test.

Each seed makes a schedule (model_app.py): the app up, refusing, slow, answering 500 or 429
with Retry-After, answering close-delimited, hanging past InactivityTimeout, down at the
start, and the worker stopped and started again (a drain) at some moment, on a standard or
a FIFO queue, with or without a poison message. A real server, a real worker and the app
run the schedule; afterwards a checker reads what the server holds (the queue and its
dead-letter queue) and the app's log of every POST and asserts the promises that
settlement.py states:

1. nothing is lost: each message was answered 2xx or is in the dead-letter queue;
2. a 2xx is final: no message is POSTed again after the app answered it 2xx;
3. dead-lettered only after the app itself failed it MaxRetries times (a non-2xx, a hang
   past InactivityTimeout, a request dropped): refused connections never count; a drain
   hands what it holds back, which may cost each message one receive;
4. FIFO: within a group, no message is POSTed before the one before it succeeded or was
   dead-lettered, and never two at once; on a standard queue every other seed sends its
   messages in groups and the worker caps them itself (GroupConcurrency, the queue has no
   ConveyorGroupConcurrency): never more of a group at the app at once than the cap;
5. the worker found none of its own invariants broken.

In CI, 50 seeds (10 at a time, each its own queue, app and worker); with
CONVEYOR_LONG_TESTS=1, 1,000. A failure names its seed; CONVEYOR_MODEL_SEED=N replays one.
The schedules run on real time, short (a few seconds each): the worker's heartbeats,
back-offs and probes are all in play, with VisibilityTimeout 4 s so that holding through
an outage needs the heartbeats.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from typing import Any

import pytest

from conveyor.worker import Worker, load_config
from tests.support import ServerProcess
from tests.worker.conftest import FAST, aio, queue_total, run
from tests.worker.model_app import POISON, Post, Schedule, ScheduledApp
from tests.worker.outage_app import bodies_in

MAX_RETRIES = 3
INACTIVITY_S = 1
OPTIONS = {**FAST, "MaxRetries": MAX_RETRIES, "ErrorVisibilityTimeout": 1,
           "InactivityTimeout": INACTIVITY_S, "ConnectTimeout": 1, "VisibilityTimeout": 4,
           "HttpConnections": 4, "PollWaitTime": 20, "ExtendedPollWaitTime": 20,
           "DrainTimeout": 3}
AT_ONCE = 10
GROUP_CAP = 2  # GroupConcurrency of the standard queues' grouped seeds
LONG = os.environ.get("CONVEYOR_LONG_TESTS") == "1"
SEEDS = ([int(os.environ["CONVEYOR_MODEL_SEED"])] if os.environ.get("CONVEYOR_MODEL_SEED")
         else list(range(1000 if LONG else 50)))
CHUNKS = [SEEDS[i:i + AT_ONCE] for i in range(0, len(SEEDS), AT_ONCE)]


class Run:
    """One schedule's run: its queue, app, worker(s) and what they left behind."""

    def __init__(self, server: ServerProcess, sqs: Any, seed: int) -> None:
        self.schedule = Schedule.generate(seed)
        self.sqs = sqs
        suffix = ".fifo" if self.schedule.fifo else ""
        self.url = f"{server.url}/000000000000/model-{os.getpid()}-{seed}-{time.time_ns()}{suffix}"
        self.app = ScheduledApp(self.schedule, hang_s=INACTIVITY_S + 0.5)
        self.bodies = [f"m{seed}-{i}" for i in range(self.schedule.messages)]
        if self.schedule.poison:
            self.bodies.append(POISON.decode())
        self.groups = {body: f"g{i % 3}" for i, body in enumerate(self.bodies)}
        self.capped = not self.schedule.fifo and seed % 2 == 0  # groups, capped by the worker
        self.broken: list[str] = []
        self.dead_letters: list[str] = []
        self.left = -1

    async def go(self) -> None:
        schedule = self.schedule
        await self.app.start()
        worker, task = await self._start()
        url = worker.queue_url
        await aio(self._send, url, self.bodies[: len(self.bodies) // 2 + 1])
        later = self.bodies[len(self.bodies) // 2 + 1:]
        begun = time.monotonic()
        if schedule.restart_at_s is not None:
            await asyncio.sleep(schedule.restart_at_s)
            await self._stop(worker, task)
            worker, task = await self._start()
        await asyncio.sleep(max(0.0, schedule.length_s / 2 - (time.monotonic() - begun)))
        await aio(self._send, url, later)  # arriving, maybe together, maybe mid-outage
        await asyncio.sleep(max(0.0, schedule.length_s - (time.monotonic() - begun)))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.left = await aio(queue_total, self.sqs, url)
            if self.left == 0:
                break
            await asyncio.sleep(0.2)
        await self._stop(worker, task)
        await self.app.stop()
        assert worker.queues is not None and worker.queues.dead_letter_url is not None
        self.dead_letters = await aio(bodies_in, self.sqs, worker.queues.dead_letter_url)

    async def _start(self) -> tuple[Worker, asyncio.Task[None]]:
        capped = {"GroupConcurrency": GROUP_CAP} if self.capped else {}
        config = load_config({"WorkerQueueURL": self.url, "AppURL": self.app.url, **OPTIONS,
                              **capped})
        worker = Worker(config, hooks=())
        task = asyncio.create_task(worker.run())
        await asyncio.wait({task, asyncio.create_task(worker.ready.wait())}, timeout=30,
                           return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        return worker, task

    async def _stop(self, worker: Worker, task: asyncio.Task[None]) -> None:
        worker.stop()
        await asyncio.wait_for(task, 30)
        invariants = getattr(getattr(worker, "settlement", None), "invariants", None)
        self.broken += invariants.broken if invariants is not None else []

    def _send(self, url: str, bodies: list[str]) -> None:
        for start in range(0, len(bodies), 10):
            entries = []
            for i, body in enumerate(bodies[start:start + 10]):
                entry: dict[str, Any] = {"Id": str(i), "MessageBody": body,
                                         "MessageAttributes": {"group": {
                                             "DataType": "String",
                                             "StringValue": self.groups[body]}}}
                if self.schedule.fifo:
                    entry |= {"MessageGroupId": self.groups[body],
                              "MessageDeduplicationId": body}
                elif self.capped:
                    entry["MessageGroupId"] = self.groups[body]
                entries.append(entry)
            if entries:
                self.sqs.send_message_batch(QueueUrl=url, Entries=entries)

    # -- the checker -------------------------------------------------------------------

    def problems(self) -> list[str]:
        """What broke the promises (empty: nothing)."""
        found = [f"the worker found its invariant broken: {what}" for what in self.broken]
        if self.left != 0:
            found.append(f"{self.left} messages still in the queue")
        posts: dict[str, list[Post]] = {}
        for post in self.app.posts:
            posts.setdefault(post.body.decode(), []).append(post)
        drains = 1 if self.schedule.restart_at_s is not None else 0
        for body in self.bodies:
            mine = posts.get(body, [])
            oks = [i for i, post in enumerate(mine) if post.ok]
            dead = self.dead_letters.count(body)
            if not oks and not dead:
                found.append(f"{body}: lost (never answered 2xx, not dead-lettered)")
            if oks and oks[0] != len(mine) - 1:
                found.append(f"{body}: POSTed again after a 2xx: {_answers(mine)}")
            failures = sum(not post.ok for post in mine)
            if dead and failures < MAX_RETRIES - drains:
                found.append(f"{body}: dead-lettered after {failures} failures of its own "
                             f"(MaxRetries {MAX_RETRIES}): {_answers(mine)}")
            if dead > 1 or (dead and oks):
                found.append(f"{body}: dead-lettered {dead} times, answered 2xx {len(oks)}")
        if self.schedule.fifo:
            found += fifo_problems(self.bodies, self.groups, posts)
        if self.capped:
            found += self._cap_problems()
        return found

    def _cap_problems(self) -> list[str]:
        """GroupConcurrency: the most POSTs of each group open at once, from the app's log."""
        found = []
        for group in sorted(set(self.groups.values())):
            edges = sorted(edge for post in self.app.posts if post.group == group
                           for edge in ((post.started_s, 1), (_end(post), -1)))
            most = max(itertools.accumulate(step for _, step in edges), default=0)
            if most > GROUP_CAP:
                found.append(f"group {group}: {most} POSTs at once (GroupConcurrency "
                             f"{GROUP_CAP})")
        return found



def fifo_problems(bodies: list[str], groups: dict[str, str],
                  posts: dict[str, list[Post]]) -> list[str]:
    """FIFO: within a group, each message's first POST after the one before it was done
    (its last POST), and no message POSTed again while a POST of it was still open."""
    found = []
    for group in sorted(set(groups.values())):
        members = [b for b in bodies if groups[b] == group and posts.get(b)]
        previous, previous_end = "", -1.0
        for body in members:
            mine = posts[body]
            if mine[0].started_s < previous_end:
                found.append(f"group {group}: {body} POSTed before the one before it was "
                             f"done: {_timeline(posts[previous] + mine)}")
            for earlier, later in zip(mine, mine[1:], strict=False):
                if later.started_s < _end(earlier):
                    found.append(f"group {group}: {body} POSTed twice at once")
            previous, previous_end = body, _end(mine[-1])
    return found


def _end(post: Post) -> float:
    """When the worker was done with a POST: the app's answer, or the worker closing the
    connection of a hang (InactivityTimeout); less a margin, as the app may see either
    a little after the worker does."""
    return post.ended_s - 0.05


def _timeline(posts: list[Post]) -> str:
    """Each POST as its body, answer and receive count from start to end (in seconds)."""
    return ", ".join(f"{post.body.decode()} {post.answer}@{post.receive_count} "
                     f"{post.started_s % 1000:.3f}-{post.ended_s % 1000:.3f}"
                     for post in sorted(posts, key=lambda post: post.started_s))


def _answers(posts: list[Post]) -> str:
    return ", ".join(f"{post.answer}@{post.receive_count}" for post in posts)


@pytest.mark.parametrize("seeds", CHUNKS, ids=[f"seeds-{c[0]}-{c[-1]}" for c in CHUNKS])
def test_the_promises_hold_on_generated_schedules(server: ServerProcess, sqs: Any,
                                                   seeds: list[int]) -> None:
    runs = [Run(server, sqs, seed) for seed in seeds]

    async def scenario() -> None:
        await asyncio.gather(*(one.go() for one in runs))

    run(scenario(), timeout_s=240)
    failed = {one.schedule.seed: one.problems() for one in runs}
    failed = {seed: problems for seed, problems in failed.items() if problems}
    if failed:
        lines = [f"seed {seed} ({Schedule.generate(seed)}): replay with "
                 f"CONVEYOR_MODEL_SEED={seed}\n  " + "\n  ".join(problems)
                 for seed, problems in failed.items()]
        pytest.fail("\n".join(lines))


def _post(body: str, answer: str, started_s: float, ended_s: float) -> Post:
    return Post(f"id-{body}", body.encode(), 1, "g0", started_s, ended_s, answer)


@pytest.mark.parametrize(("history", "expected"), [
    # b went while a's hang was still open (the worker closed it only at 1.0): out of order
    ({"a": [_post("a", "hang", 0.0, 1.0)], "b": [_post("b", "200", 0.5, 0.6)]},
     ["group g0: b POSTed before the one before it was done"]),
    # a hang the app read late (0.3): it ends when the worker closed it (1.0), so b at 1.1
    # is in order
    ({"a": [_post("a", "hang", 0.3, 1.0)], "b": [_post("b", "200", 1.1, 1.2)]}, []),
    # a POSTed again while its first POST was still open
    ({"a": [_post("a", "500", 0.0, 1.0), _post("a", "200", 0.5, 1.5)]},
     ["group g0: a POSTed twice at once"]),
    ({"a": [_post("a", "500", 0.0, 0.2), _post("a", "200", 1.2, 1.3)],
      "b": [_post("b", "200", 1.4, 1.5)]}, []),
])
def test_the_fifo_checker_flags_out_of_order_and_overlapping_posts(
        history: dict[str, list[Post]], expected: list[str]) -> None:
    found = fifo_problems(["a", "b"], {"a": "g0", "b": "g0"}, history)
    assert [line.split(":", 2)[0] + ":" + line.split(":", 2)[1] for line in found] == expected
