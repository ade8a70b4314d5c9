"""The budget route on the Powertools HTTP API resolver (the OpenAPI document comes from here)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from functions.budget.dependencies import BudgetDependencies
from functions.budget.service import read_budget
from shared.contract import BudgetDocument
from shared.http import create_resolver, current_caller, json_response
from shared.openapi_responses import json_response as json_entry
from shared.openapi_responses import problem_responses

app = create_resolver()


@app.get(
    "/v1/budget",
    summary="Get the caller's token budget",
    description=(
        "The monthly token budget of the caller's tenant, this calendar month (UTC): the limit (null "
        "when there is none), the tokens its ended jobs used, the tokens its running jobs hold (each "
        "reserved its upper bound at submit), and what new jobs may still reserve."
    ),
    operation_id="getBudget",
    tags=["budget"],
    responses={200: json_entry("The tenant's budget this period.", BudgetDocument), **problem_responses()},
)
def budget() -> Response[Any]:
    """The caller's tenant's budget."""
    deps: BudgetDependencies = app.context["deps"]
    return json_response(200, read_budget(deps, current_caller(app)))
