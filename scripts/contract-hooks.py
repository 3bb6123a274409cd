"""schemathesis hooks for scripts/test-contract.

`positive_data_acceptance` sends requests that the OpenAPI document calls valid and fails on any 4xx but 401, 403,
404 and 409. A few of the server's rules are not JSON Schema's to say: the document describes them in the field's
description, and a request that breaks one is refused with a 400 naming that field. Those refusals, and only those,
are dropped here.

`negative_data_rejection` sends requests the document calls invalid and fails on a 2xx. `POST /v1/finish` answers
each job apart: a job whose entry breaks a rule is refused in its own `results[i].error`, and the others finish (as
the document says). Such an answer, with that job's error in it, is a refusal, and is dropped here.

Every other check, and every other failure, still fails the run.
"""

import json
import re

import schemathesis
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.openapi.checks import RejectedPositiveData

# The fields (the last part of the error's `field`, without an index) whose rules JSON Schema cannot say, and why.
UNSAYABLE = {
    # A grammar with ranges per field (`*/15 9-17 * * MON-FRI`, `0 0 31 2 *` never runs).
    "cron": "a cron expression",
    # Bedrock's repeat syntax (`FINISHED, +5 MINUTES`) or a cron expression.
    "schedule": "a schedule",
    # A name in the server's time zone database, and only beside a schedule.
    "time_zone": "a time zone",
    # SQL that the database parses as one read.
    "query": "SQL",
    # At most `retry.max_delay_ms`: JSON Schema cannot compare two fields.
    "initial_delay_ms": "a delay within the retry's maximum",
    # One weight per queue: JSON Schema cannot compare two arrays' lengths.
    "weights": "one weight per queue",
    # At or before `until`: JSON Schema cannot compare two parameters.
    "since": "a window's start before its end",
    # Not with `delay_ms` (`not: {required: [run_at, delay_ms]}` would say it, which utoipa's derive does not
    # write; the fields' descriptions say it).
    "run_at": "a time or a delay, not both",
    # Likewise, a sleep gives `until` or `for_ms`, exactly one (the fields' descriptions say it).
    "until": "a sleep's wake time or its length, exactly one",
    # Likewise: a debounced push times its own run and has no unique key, parent, dependencies or schedule (the
    # field's description says it).
    "debounce": "not with run_at, delay_ms, unique_key, parent, depends_on or schedule",
    # A debounce's delay is at most its max_wait: JSON Schema cannot compare two fields.
    "debounce.delay_ms": "a debounce's delay within its max_wait",
    # A recurring template's job has no parent, dependencies or schedule of its own (the template reuses the
    # push's schema, whose fields those are); and a parent or dependency must exist (below).
    # A parent or dependency must exist: a referenced job that does not is bad input (400), not a missing
    # resource (404), and whether it exists is no schema's to say.
    "parent": "no parent in a recurring template, and a job that exists",
    "depends_on": "no dependencies in a recurring template, and jobs that exist",
    # A finish's `take` is a dequeue that never waits (it reuses the dequeue's schema, which may wait).
    "take.wait_ms": "no wait in a finish's take",
    # Neither id all zeros (the pattern says the rest; the description says this), and none in a recurring
    # template (which reuses the push's schema).
    "trace_parent": "ids not all zeros, and no trace context in a recurring template",
    # A batch must exist and take jobs (whether it does is no schema's to say), and a job added through a batch's
    # own path names that batch or none: a rule between the path and the body.
    "batch": "a batch that exists and has not completed, and in a batch's path that batch",
    # A job of a batch is one run, made by its push: no unique key, throttle, debounce or schedule (the batch
    # field's description says it).
    "unique_key": "no unique key in a job of a batch",
    "throttle": "no throttle in a job of a batch",
}


def _error_field(response):
    try:
        return json.loads(response.content)["error"]["field"] or ""
    except (ValueError, KeyError, TypeError):
        return ""


def _refused_in_results(response):
    try:
        return any(result.get("error") for result in json.loads(response.content)["results"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return False


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keeps every failure but those the module's docstring names."""
    if isinstance(failure, AcceptedNegativeData):
        return not (
            case.operation.path == "/v1/finish" and response.status_code == 200 and _refused_in_results(response)
        )
    if not isinstance(failure, RejectedPositiveData) or response.status_code != 400:
        return True
    field = _error_field(response)
    # An option's value depends on which option the path names: JSON Schema cannot tie a body to a path parameter.
    if case.operation.path == "/v1/config/{key}" and field == case.path_parameters.get("key"):
        return False
    # A bulk action takes a queue only with `move` (and needs one then), and exactly one of `ids` and `filter`:
    # rules between fields, which the fields' descriptions say.
    if case.operation.path == "/v1/jobs/bulk" and field in ("queue", "ids"):
        return False
    # A batch's callback is a push made by the batch's end: no timing, parent, dependencies, schedule, trace or batch
    # of its own, and data that is an object without a member `batch` (the callbacks' descriptions say it; they
    # reuse the push's schema).
    if case.operation.path == "/v1/batches" and re.match(r"^on_(success|complete)\.", field):
        return False
    # A batch's job is named by its index (`jobs[3].debounce.delay_ms`): the rule is the field's within the job.
    within = re.sub(r"^jobs\[\d+\]\.", "", field)
    last = field.rsplit(".", 1)[-1].split("[", 1)[0]
    return within not in UNSAYABLE and last not in UNSAYABLE
